"""One attempt's tool rounds: measured, counted once, judged against the target."""
