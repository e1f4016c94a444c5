python3 -m advisor recommend meta-llama/Llama-3.1-8B-Instruct --gpu H200 --gpus 1 --vllm-version 0.26 --prompt-len 1024 --output-len 512 --max-tpot-ms 12
