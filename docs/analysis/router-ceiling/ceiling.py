#!/usr/bin/env python3
"""How far can a linear head on USE-lite embeddings go on LLMRouter? (numpy only)

Trains softmax heads on the embeddings written by dump-features.ts, for split seeds 0..4 (test
split, by unique prompt, as `fugu router study`), and prints mean test reward of:
  - best per task (knows the task label);
  - heads on the embedding: SFT soft labels softmax(r/tau) (what `fugu router train` does), and
    direct maximisation of the expected reward sum_j pi_j r_ij (what ES optimises, smoothed);
  - the same heads given the TRUE TASK as an extra one-hot input (an upper bound on what better
    task recognition could buy);
  - a head imitating best-per-task's choices from the embedding alone.
    python3 docs/analysis/router-ceiling/ceiling.py [dir written by dump-features.ts]
"""
import collections, json, sys
import numpy as np

d = sys.argv[1] if len(sys.argv) > 1 else "/tmp/router-ceiling"
M = json.load(open(f"{d}/meta.json"))
R = M["rows"]; N = len(R)
E = np.fromfile(f"{d}/emb.f32", dtype=np.float32).reshape(N, 512).astype(np.float64)
tasks = sorted({r["task"] for r in R})
T = np.array([tasks.index(r["task"]) for r in R])
S = np.array([r["scores"] for r in R], dtype=np.float64)
SPL = np.array([r["splits"] for r in R])
ONEHOT = np.eye(len(tasks))[T]


def softmax(x):
    x = x - x.max(1, keepdims=True); e = np.exp(x); return e / e.sum(1, keepdims=True)


def train(X, Y, objective, l2=1e-4, iters=600, lr=0.01):
    """Full-batch Adam on a linear softmax head. objective 'kl': soft labels Y; 'reward': maximise E_pi[r], Y = rewards."""
    n, dim = X.shape; k = Y.shape[1]
    W = np.zeros((dim, k)); b = np.zeros(k); mW = np.zeros_like(W); vW = np.zeros_like(W); mb = np.zeros(k); vb = np.zeros(k)
    for it in range(1, iters + 1):
        P = softmax(X @ W + b)
        G = (P - Y) / n if objective == "kl" else -(P * (Y - (P * Y).sum(1, keepdims=True))) / n
        gW = X.T @ G + l2 * W; gb = G.sum(0)
        mW = .9 * mW + .1 * gW; vW = .999 * vW + .001 * gW ** 2; mb = .9 * mb + .1 * gb; vb = .999 * vb + .001 * gb ** 2
        a = lr * np.sqrt(1 - .999 ** it) / (1 - .9 ** it)
        W -= a * mW / (np.sqrt(vW) + 1e-8); b -= a * mb / (np.sqrt(vb) + 1e-8)
    return lambda Xt: Xt @ W + b


res = collections.defaultdict(list)
for seed in range(5):
    tr = SPL[:, seed] == "train"; te = SPL[:, seed] == "test"
    best = np.array([S[tr & (T == t)].mean(0).argmax() for t in range(len(tasks))])
    score = lambda f, X: S[te, f(X[te]).argmax(1)].mean()
    res["best single worker"].append(S[te, S[tr].mean(0).argmax()].mean())
    res["best per task (knows the task)"].append(S[te, best[T[te]]].mean())
    res["oracle"].append(S[te].max(1).mean())
    EO = np.hstack([E, ONEHOT])
    res["SFT tau=0.2 (embedding)"].append(score(train(E[tr], softmax(S[tr] / 0.2), "kl"), E))
    res["SFT tau=1 (embedding)"].append(score(train(E[tr], softmax(S[tr] / 1.0), "kl"), E))
    res["max E[r] (embedding)"].append(score(train(E[tr], S[tr], "reward"), E))
    res["SFT tau=0.2 (embedding + TRUE task)"].append(score(train(EO[tr], softmax(S[tr] / 0.2), "kl"), EO))
    res["max E[r] (embedding + TRUE task)"].append(score(train(EO[tr], S[tr], "reward"), EO))
    res["imitate best per task (embedding)"].append(score(train(E[tr], np.eye(S.shape[1])[best[T[tr]]], "kl"), E))
    print(f"split seed {seed} done", file=sys.stderr, flush=True)
print(f"{'method':40s} {'mean':>7s} {'sd':>7s}   (test split, 5 split seeds)")
for k, v in res.items():
    print(f"{k:40s} {np.mean(v):7.4f} {np.std(v, ddof=1):7.4f}")
