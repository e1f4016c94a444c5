python3 /root/stash/run/gridbench.py --results /root/results/grid.jsonl --boots /root/results/boots.jsonl --model /root/stash/models/Qwen3-30B-A3B --spec none --conc 1,8,32,64 --reps 3
