python3 -m advisor recommend RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8 --gpu H200 --gpus 1 --vllm-version 0.26 --prompt-len 1024 --output-len 512 --max-tpot-ms 20
