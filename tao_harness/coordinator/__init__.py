"""`tao coordinator`: session state machine, waiting pool, replica registry, plan apply and revalidation."""
