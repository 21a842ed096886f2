// TAO tool telemetry for OpenCode, loaded by `tao-run` through OPENCODE_CONFIG_CONTENT.
//
// Reports each tool call to the local relay of `tao-run` (TAO_RELAY_URL) as tao_harness.events JSON,
// attributed to TAO_SESSION. `tool_start` is sent from `tool.execute.before`. The end is the part's
// `state.time.end` from `message.part.updated`, which also covers failed calls that never reach
// `tool.execute.after`; `tool.execute.after` closes a call whose part update did not arrive within a
// grace period. `duration_s` counts from the spawn of a bash command (its first output metadata update),
// because argument parsing and permission checks before it can take seconds and are not tool time. Posting is fire-and-forget: no hook ever
// awaits the network, so a slow or absent relay cannot delay a tool.

// Outcomes follow tao_harness/outcomes.py (ok / error / timeout / killed / cancelled + exit code):
// a bash part is "completed" whatever its command did; `state.metadata.exit` is the exit code, null when
// OpenCode's own timeout (or the user) stopped it, which its output then says.
const END_GRACE_MS = 1500;
const TIMED_OUT = "shell tool terminated command after exceeding timeout";
const USER_ABORTED = "User aborted the command";
const ABORTED = "Tool execution aborted";

// Mirrors tao_harness.outcomes.status_of_exit (tests compare the two). Not exported: OpenCode calls
// every exported function of a plugin module as a plugin.
const statusOfExit = (code) => {
  if (code === 0) return "ok";
  if (code === 124) return "timeout";
  if (code > 128 && code <= 192) return "killed";
  return "error";
};

// [status, exit code] of a finished tool part (`state`), or of `tool.execute.after`'s output.
const outcomeOf = (state) => {
  const metadata = (state && state.metadata) || {};
  if (state && state.status === "error") {
    const aborted = metadata.interrupted === true || state.error === ABORTED;
    return [aborted ? "cancelled" : "error", null];
  }
  const exit = metadata.exit;
  if (Number.isInteger(exit)) return [statusOfExit(exit), exit];
  const text = typeof metadata.output === "string" ? metadata.output
    : typeof (state && state.output) === "string" ? state.output : "";
  if ("exit" in metadata) {
    // A bash command without an exit code: stopped by OpenCode's timeout or by the user.
    if (text.includes(TIMED_OUT)) return ["timeout", null];
    if (text.includes(USER_ABORTED)) return ["cancelled", null];
    return ["killed", null];
  }
  return ["ok", null];
};

export const TaoTelemetry = async () => {
  const relay = process.env.TAO_RELAY_URL;
  const session = process.env.TAO_SESSION;
  if (!relay || !session) return {};

  const started = new Map(); // callID -> start time (ms)
  const spawned = new Map(); // callID -> when the command was really spawned (ms), bash only
  const ended = new Set(); // callIDs already closed
  let harnessSession = null;

  const post = (path, body) => {
    try {
      fetch(relay + path, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      }).catch(() => {});
    } catch {
      // fetch itself threw (no relay URL scheme, etc.): telemetry is best effort
    }
  };

  const joinSession = (sessionID) => {
    if (harnessSession !== null || typeof sessionID !== "string") return;
    harnessSession = sessionID;
    post("/v1/sessions", {
      session,
      harness: "opencode",
      labels: {},
      started_at: Date.now() / 1000,
      harness_session_id: sessionID,
    });
  };

  const start = (callID, tool, args, atMs, sessionID) => {
    if (!callID || started.has(callID)) return;
    joinSession(sessionID);
    started.set(callID, atMs);
    const input = args && typeof args === "object" ? args : {};
    post("/v1/events", {
      type: "tool_start",
      session,
      call_id: callID,
      tool_name: tool || "unknown",
      harness: "opencode",
      at: atMs / 1000,
      command: typeof input.command === "string" ? input.command : null,
      args: input,
    });
  };

  const end = (callID, atMs, [status, exitCode]) => {
    if (!callID || ended.has(callID) || !started.has(callID)) return;
    ended.add(callID);
    const startMs = spawned.has(callID) ? spawned.get(callID) : started.get(callID);
    post("/v1/events", {
      type: "tool_end",
      session,
      call_id: callID,
      at: atMs / 1000,
      duration_s: Math.max(0, atMs - startMs) / 1000,
      status,
      exit_code: exitCode,
    });
  };

  return {
    "tool.execute.before": async (input, output) => {
      start(input.callID, input.tool, output && output.args, Date.now(), input.sessionID);
    },
    "tool.execute.after": async (input, output) => {
      const fallbackAt = Date.now();
      const outcome = outcomeOf({ status: "completed", metadata: output && output.metadata,
        output: output && output.output });
      setTimeout(() => end(input.callID, fallbackAt, outcome), END_GRACE_MS);
    },
    event: async ({ event }) => {
      if (!event || event.type !== "message.part.updated") return;
      const part = event.properties && event.properties.part;
      if (!part || part.type !== "tool" || !part.state) return;
      const state = part.state;
      const time = state.time || {};
      if (state.status === "running" && state.metadata && "output" in state.metadata && !spawned.has(part.callID)) {
        // The bash tool publishes its (empty) output right after spawning the command; the parse and
        // permission steps before that can take seconds on a loaded machine and are not tool time.
        spawned.set(part.callID, Date.now());
      }
      if ((state.status !== "completed" && state.status !== "error") || typeof time.end !== "number") return;
      // A call that failed before it was executed (bad arguments, denied) had no before hook.
      start(part.callID, part.tool, state.input, typeof time.start === "number" ? time.start : time.end,
        part.sessionID);
      end(part.callID, time.end, outcomeOf(state));
    },
  };
};
