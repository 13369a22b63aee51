"""The agent models: the one interface every node talks to, and what answers through it."""
