# Writes the framing goldens that come from reference logic rather than from
# diffeval: request bodies built the way vLLM's gsm8k_eval.py and lm-eval's
# gsm8k chat task build them, serialised by Python's json.dumps, and
# lm-eval's shot draw, random.Random(1234).sample(train, 5) per test
# question. Run from the repository root with the machine's python3:
#   GSM8K_DIR=/path/to/gsm8k python3 tests/golden/make_framing_goldens.py
# It prints the sha256 and length of the official-set bodies, which
# tests/unit/test_framing_golden.cpp pins (the official text is not ours to
# commit).
import hashlib
import json
import os
import random


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if not line.startswith("#") and line.strip()]


def vllm_chat_body(train, question, num_shots=5, gen_prefix="", **optional):
    # gsm8k_eval.py: _build_gsm8k_prompts, then call_vllm_chat_api.
    shots = "".join(
        f"Question: {train[i]['question']}\nAnswer:{gen_prefix} {train[i]['answer']}\n\n"
        for i in range(num_shots))
    prompt = shots + f"Question: {question['question']}\nAnswer:{gen_prefix}"
    data = {"messages": [{"role": "user", "content": prompt}], "max_tokens": 256,
            "stop": ["Question", "Assistant:", "<|separator|>"]}
    params = {"model": None, "temperature": None, "seed": 42, "top_p": None, "top_k": None,
              "reasoning_effort": None, "chat_template_kwargs": None}
    params.update(optional)
    data.update({k: v for k, v in params.items() if v is not None})
    return json.dumps(data)


def lm_eval_chat_body(train, question, shots, model):
    messages = []
    for i in shots:
        messages.append({"role": "user", "content": f"Question: {train[i]['question']}\nAnswer:"})
        messages.append({"role": "assistant", "content": train[i]["answer"]})
    messages.append({"role": "user", "content": f"Question: {question['question']}\nAnswer:"})
    return json.dumps({"messages": messages, "model": model, "max_tokens": 256,
                       "temperature": 0.0, "stop": ["Question:", "</s>", "<|im_end|>"],
                       "seed": 1234, "chat_template_kwargs": {"enable_thinking": False}})


train = read_jsonl("datasets/sample/train.jsonl")
test = read_jsonl("datasets/sample/test.jsonl")
with open("tests/golden/vllm_chat_sample_q0_256.json", "w") as f:
    f.write(vllm_chat_body(train, test[0]))
with open("tests/golden/vllm_chat_sample_q0_256_options.json", "w") as f:
    f.write(vllm_chat_body(train, test[0], num_shots=3, gen_prefix=" Let's think.", model="m",
                           temperature=0.6, top_p=0.95, top_k=20, reasoning_effort="low",
                           chat_template_kwargs={"enable_thinking": False}))

rng = random.Random(1234)
with open("tests/data/lm_eval_gsm8k_shots.txt", "w") as f:
    f.write("# lm-eval gsm8k: random.Random(1234).sample(range(7473), 5) per test question\n")
    for q in range(20):
        f.write(f"{q} " + ",".join(map(str, rng.sample(range(7473), 5))) + "\n")

d = os.environ.get("GSM8K_DIR")
if d:
    train = read_jsonl(f"{d}/train.jsonl")
    test = read_jsonl(f"{d}/test.jsonl")
    for name, body in [
            ("vllm-chat", vllm_chat_body(train, test[0])),
            ("lm-eval-chat", lm_eval_chat_body(train, test[0],
                                               random.Random(1234).sample(range(len(train)), 5),
                                               "Qwen/Qwen3.5-35B-A3B-FP8"))]:
        b = body.encode()
        print(name, len(b), hashlib.sha256(b).hexdigest())
