python3 -m advisor recommend mistralai/Mixtral-8x7B-Instruct-v0.1 --gpu H200 --gpus 1 --vllm-version 0.26 --prompt-len 1024 --output-len 512 --max-tpot-ms 25 --spec none
