python3 -m advisor recommend openai/gpt-oss-20b --gpu H200 --gpus 1 --vllm-version 0.26 --prompt-len 1024 --output-len 512 --max-tpot-ms 10 --spec none
