"""The evaluation behind `python -m graph.evaluate`: the paper's tables, re-run on Crafter.

methods.py runs the compared methods (RL-GPT through the graph, pure RL, pure code) at one step
budget; heldout.py plays what they produced on held-out seeds; tables.py builds the five tables;
report.py, plots.py write them out; cache.py lets a killed run skip its finished cells.
"""
