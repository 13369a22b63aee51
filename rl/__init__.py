# The smallest PPO run rl.config accepts (its bound on total_steps). Here rather than in rl.config so that
# the graph's settings and budget checks (nodes.settings, nodes.limits) read it without importing torch.
MIN_TRAIN_STEPS = 1_000
