import sys, torch
from benchmarks.ppo_throughput import ours_steps_per_s, warm_up_imports
from rl.config import RLConfig
warm_up_imports()
cfg = RLConfig(task="collect_diamond", max_episode_steps=1000)
for n, mode in [(2,"async"),(4,"async"),(2,"sync")]:
    print(n, mode, round(ours_steps_per_s(cfg, 6144, n, mode)), flush=True)
