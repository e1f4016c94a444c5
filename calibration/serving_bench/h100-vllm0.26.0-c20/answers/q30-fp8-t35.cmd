python3 -m advisor recommend Qwen/Qwen3-30B-A3B-FP8 --gpu H100 --gpus 1 --vllm-version 0.26 --prompt-len 1024 --output-len 512 --max-tpot-ms 35 --spec none
