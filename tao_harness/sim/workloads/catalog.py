"""The workloads' numbers and where each comes from.

Sources (S1–S8 are cited next to the numbers below):
- S1 TAO paper (Li et al. 2026; digest in shared/seeds 000/002): tools take 93.1% of wall time in its SWE
  workload; Table 1 task latency at 16 workers ≈ 113–124 s on SWE-Lite (mini-SWE-agent) and ≈ 298–361 s on
  Terminal-Bench 2.0 (Claude Code) for the good schedulers; the mixed coding load is 300 SWE-Lite + 89
  Terminal-Bench tasks (389); AutomationBench runs 800 tasks. Runs are closed-loop batch runs
  (`mini-extra swebench -w N`, `harbor run -n N`): every task is available at t = 0.
- S2 TraceLab (Claude Code + Codex, 432k tool calls; DESIGN.md §9): per call p50 0.3 s, p90 13.6 s,
  p99 3.6 min; 95.8% of input tokens are cache reads (append-only contexts, as generated here).
- S3 mini-SWE-agent: one `bash` tool, `environment.timeout` is the only deadline (60 s in the SWE-bench
  config), long outputs are truncated to about 10k characters (≈ 2.5k tokens); its SWE-bench trajectories
  usually stay under 20k tokens (DESIGN.md §9).
- S4 another agent corpus averages ≈ 76 steps per session (DESIGN.md §9): the long tail of the turn counts.
- S5 SWE-bench (Jimenez et al.): Lite = 300 and Verified = 500 tasks from the same 12 Python repositories;
  Verified tasks are harder on average, so they get more turns here.
- S6 Terminal-Bench (coder/mux PR #495, TB core 0.1.1 nightly runs): mean task time 356 s / 438 s for two
  frontier agents, longest successful task 20 min; tasks include kernel/QEMU builds, service start-up
  waits, dataset processing. Claude Code's Bash tool: default timeout 2 min, at most 10 min.
- S7 AutomationBench (Zapier, arXiv 2604.18934): REST workflows over 47 simulated SaaS apps (CRM, inbox,
  sheets, calendar, helpdesk); agents discover endpoints, read several sources, then write the end state.
- S8 Claude Code's system prompt + tool schemas are ≈ 15k tokens (public prompt dumps; assumption, ±30%).

Where a source gives only a median or a range, the tail is a judgement call and is marked "assumed".
The numbers were set from the sources before any simulation ran and are not tuned to any policy.
"""

from __future__ import annotations

from dataclasses import replace

from tao_harness.sim.workloads.model import LogNormal, ToolFamily, WorkloadSpec

q = LogNormal.from_quantiles

# --- SWE-bench with mini-SWE-agent (S1, S3, S5) ---------------------------------------------------------
_MINI_TIMEOUT_S = 60.0  # S3
_SWE_FAMILIES = (
    ToolFamily(
        "explore",
        "bash",
        (
            "cat {file}",
            'grep -rn "{symbol}" {dir}',
            "sed -n '{start},{end}p' {file}",
            "ls -la {dir}",
            'find . -name "*.py" -path "*{dir}*" | head -50',
            "head -n 120 {test_file}",
        ),
        duration_s=q(0.12, 0.6, 0.02, 60),
        observation_tokens=q(300, 1200, 10, 2500),  # truncation: S3
        weights=(0.70, 0.35, 0.20),
        timeout_s=_MINI_TIMEOUT_S,
    ),
    ToolFamily(
        "edit",
        "bash",
        (
            "sed -i 's/{symbol}(/{symbol}_fixed(/' {file}",
            "cat <<'EOF' > {script}\nimport {repo}\nEOF",
            "python - <<'EOF'\nfrom pathlib import Path\np = Path('{file}')\nEOF",
        ),
        duration_s=q(0.12, 0.4, 0.02, 60),
        observation_tokens=q(30, 120, 5, 500),
        weights=(0.05, 0.25, 0.15),
        timeout_s=_MINI_TIMEOUT_S,
        reply_tokens=q(300, 1000, 40, 4000),  # the reply carries the new code (assumed)
    ),
    ToolFamily(
        "script",
        "bash",
        (
            "python {script}",
            'python -c "import {module}; print({module}.__name__)"',
            "cd /testbed && python {script}",
        ),
        duration_s=q(1.0, 6.0, 0.1, 60),
        observation_tokens=q(150, 800, 5, 2500),
        weights=(0.15, 0.20, 0.15),
        timeout_s=_MINI_TIMEOUT_S,
    ),
    ToolFamily(
        "test",
        "bash",
        (
            "pytest -q {test_file}",
            "python -m pytest -x {test_file} -k {symbol}",
            "timeout {limit} python -m pytest -q {test_file}",
        ),
        duration_s=q(8.0, 40.0, 0.5, 600),
        observation_tokens=q(300, 1500, 20, 2500),
        weights=(0.05, 0.15, 0.40),
        timeout_s=_MINI_TIMEOUT_S,
        limits_s=(30, 60),
    ),
    ToolFamily(
        "install",
        "bash",
        ("pip install -e .", "pip install {pkg}", "python setup.py build_ext --inplace"),
        duration_s=q(12.0, 45.0, 1.0, 600),
        observation_tokens=q(300, 1200, 20, 2500),
        weights=(0.04, 0.03, 0.02),
        timeout_s=_MINI_TIMEOUT_S,
    ),
    ToolFamily(
        "git",
        "bash",
        ("git diff", "git status", "git log --oneline -5", "git diff {file}"),
        duration_s=q(0.08, 0.3, 0.02, 60),
        observation_tokens=q(300, 1500, 10, 2500),
        weights=(0.01, 0.02, 0.08),
        timeout_s=_MINI_TIMEOUT_S,
    ),
)

SWE_LITE = WorkloadSpec(
    name="swe-lite",
    prefix_group="mini-swe-agent-swebench",
    shared_prefix_tokens=1800,  # system + instance template text of the SWE-bench config (assumed)
    task_tokens=q(600, 1600, 100, 8000),  # issue text
    turns=q(24, 55, 3, 250),  # median keeps contexts under 20k (S3); tail toward S4's 76
    reply_tokens=q(150, 420, 20, 4000),  # THOUGHT + one command; ≈ 6.6k output tokens per task (S1, below)
    final_reply_tokens=q(60, 200, 10, 1000),  # the `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT` turn
    turn_overhead_tokens=40,  # <returncode>/<output> wrapper around each observation
    max_context_tokens=128_000,
    families=_SWE_FAMILIES,
    vocabulary="swe",
)

# Same repositories and harness; harder tasks (S5), so longer issues and more turns (assumed +25%).
SWE_VERIFIED = replace(
    SWE_LITE, name="swe-verified", task_tokens=q(700, 2000, 100, 8000), turns=q(30, 70, 3, 250)
)

# --- Terminal-Bench 2.0 with Claude Code (S1, S2, S6, S8) ------------------------------------------------
_BASH_DEFAULT_TIMEOUT_S = 120.0  # S6: Claude Code Bash default; kills the call but is not in the hook payload
_BASH_MAX_TIMEOUT_S = 600.0  # S6: the maximum, which agents pass explicitly (`timeout` arg) for builds
_TERMINAL_FAMILIES = (
    ToolFamily(
        "read",
        "Read",
        (),
        args=(("file_path", "{file}"),),
        duration_s=q(0.03, 0.15, 0.005, 5),
        observation_tokens=q(800, 3000, 20, 10000),
        weights=(0.30, 0.12, 0.08),
    ),
    ToolFamily(
        "search",
        "Grep",
        (),
        args=(("pattern", "{symbol}"), ("path", "{dir}")),
        duration_s=q(0.08, 0.4, 0.01, 10),
        observation_tokens=q(200, 1000, 10, 5000),
        weights=(0.10, 0.05, 0.03),
    ),
    ToolFamily(
        "write",
        "Write",
        (),
        args=(("file_path", "{file}"),),
        duration_s=q(0.03, 0.1, 0.005, 5),
        observation_tokens=q(30, 100, 5, 400),
        weights=(0.04, 0.20, 0.10),
        reply_tokens=q(400, 1500, 50, 8000),  # the file body is in the reply
    ),
    ToolFamily(
        "shell",
        "Bash",
        (
            "ls -la {dir}",
            "cat {file}",
            'grep -rn "{symbol}" {dir}',
            "ps aux | grep {pkg}",
            "curl -s localhost:{port}/health",
            "nohup python3 {script} > /tmp/server.log 2>&1 &",
        ),
        duration_s=q(0.15, 1.0, 0.01, 120),
        observation_tokens=q(200, 1200, 5, 8000),
        weights=(0.30, 0.25, 0.25),
        timeout_s=_BASH_DEFAULT_TIMEOUT_S,
        exposes_timeout=False,
    ),
    ToolFamily(
        "install",
        "Bash",
        ("apt-get update && apt-get install -y {apt}", "pip install {pkg}", "npm install"),
        duration_s=q(12.0, 50.0, 1.0, 600),
        observation_tokens=q(300, 1500, 20, 6000),
        weights=(0.12, 0.05, 0.02),
        timeout_s=_BASH_MAX_TIMEOUT_S,
    ),
    ToolFamily(
        "build",
        "Bash",
        (
            "make -j8 {target}",
            "cmake --build build -j8",
            "cargo build --release",
            "gcc -O2 -o main {file}",
            "timeout {limit} make {target}",
        ),
        duration_s=q(20.0, 120.0, 1.0, 1200),
        observation_tokens=q(400, 2000, 20, 8000),
        weights=(0.05, 0.10, 0.08),
        timeout_s=_BASH_MAX_TIMEOUT_S,
        limits_s=(60, 300, 600),
    ),
    ToolFamily(
        "run",
        "Bash",
        (
            "python3 {script}",
            "pytest -q {test_file}",
            "bash run_tests.sh",
            "timeout {limit} python3 {script}",
        ),
        duration_s=q(2.0, 20.0, 0.1, 600),
        observation_tokens=q(300, 1500, 10, 8000),
        weights=(0.05, 0.18, 0.37),
        timeout_s=_BASH_DEFAULT_TIMEOUT_S,
        exposes_timeout=False,
        limits_s=(30, 60),
    ),
    ToolFamily(
        "wait",
        "Bash",
        (
            "sleep {sleep}",
            "sleep {sleep} && curl -s localhost:{port}/health",
            "sleep {sleep} && tail -n 50 /tmp/server.log",
        ),
        duration_s=q(0.05, 0.5, 0.01, 10),
        observation_tokens=q(60, 400, 5, 2000),
        weights=(0.03, 0.08, 0.10),
        timeout_s=_BASH_DEFAULT_TIMEOUT_S,
        exposes_timeout=False,
        sleeps_s=(2, 5, 10, 15, 30, 60),
    ),
)

TERMINAL_BENCH = WorkloadSpec(
    name="terminal-bench",
    prefix_group="claude-code-system",
    shared_prefix_tokens=15_000,  # S8
    task_tokens=q(400, 1200, 50, 6000),
    turns=q(40, 90, 3, 300),  # assumed: ≈ 7.5 s of tools per call × 40 ≈ S6's 300–400 s per task
    reply_tokens=q(150, 600, 10, 4000),
    final_reply_tokens=q(150, 500, 10, 2000),
    turn_overhead_tokens=20,
    max_context_tokens=200_000,
    families=_TERMINAL_FAMILIES,
    vocabulary="terminal",
)

# --- AutomationBench (S1, S7) -------------------------------------------------------------------------
_AUTOMATION_FAMILIES = (
    ToolFamily(
        "discover",
        "api_search_endpoints",
        (),
        args=(("app", "{app}"),),
        duration_s=q(0.1, 0.5, 0.01, 30),
        observation_tokens=q(900, 3000, 50, 8000),
        weights=(0.30, 0.05, 0.02),
    ),
    ToolFamily(
        "read",
        "{app}_{read}",
        (),
        args=(("company", "{company}"), ("query", "{symbol}")),
        duration_s=q(0.3, 1.5, 0.02, 30),
        observation_tokens=q(600, 2500, 30, 8000),
        weights=(0.60, 0.55, 0.25),
    ),
    ToolFamily(
        "write",
        "{app}_{write}",
        (),
        args=(("company", "{company}"), ("record", "{symbol}")),
        duration_s=q(0.4, 2.0, 0.02, 30),
        observation_tokens=q(80, 300, 10, 2000),
        weights=(0.10, 0.40, 0.73),
    ),
)

AUTOMATION = WorkloadSpec(
    name="automation",
    prefix_group="automationbench-system",
    shared_prefix_tokens=9_000,  # system prompt + policy + tool schemas (assumed)
    task_tokens=q(250, 600, 40, 3000),  # one trigger message (S7)
    turns=q(14, 30, 2, 120),  # multi-hop lookups, then writes (S7; assumed)
    reply_tokens=q(120, 400, 10, 3000),
    final_reply_tokens=q(150, 400, 10, 2000),
    turn_overhead_tokens=20,
    max_context_tokens=128_000,
    families=_AUTOMATION_FAMILIES,
    vocabulary="automation",
)

# The paper's mixed coding load: 300 SWE-Lite + 89 Terminal-Bench tasks (S1).
MIXED_COMPONENTS: tuple[tuple[WorkloadSpec, float], ...] = ((SWE_LITE, 300 / 389), (TERMINAL_BENCH, 89 / 389))

SPECS: dict[str, WorkloadSpec] = {s.name: s for s in (SWE_LITE, SWE_VERIFIED, TERMINAL_BENCH, AUTOMATION)}
