"""The linalg op beside PyTorch eager in one process: a batch of 64 SPD 64x64 f32 matrices
(and 8 right-hand sides), each function through rlx.from_torch, medians of 15 runs, 2 threads.

  PYTHONPATH=build/python /usr/bin/python3 bench/linalg_vs_torch.py
"""
import time, numpy as np, torch, sys
import rlx
torch.set_num_threads(2)
class M(torch.nn.Module):
    def __init__(self, fn): super().__init__(); self.fn = fn
    def forward(self, a, b): return self.fn(a, b)
torch.manual_seed(0)
A = torch.randn(64, 64, 64); A = A @ A.mT + 64 * torch.eye(64); B = torch.randn(64, 64, 8)
cases = {"cholesky": lambda a, b: torch.linalg.cholesky(a), "solve": lambda a, b: torch.linalg.solve(a, b),
         "det": lambda a, b: torch.linalg.det(a), "qr": lambda a, b: torch.linalg.qr(a)[1],
         "svd": lambda a, b: torch.linalg.svdvals(a), "eigh": lambda a, b: torch.linalg.eigvalsh(a),
         "inv": lambda a, b: torch.linalg.inv(a)}
def med(f, n=15):
    f(); ts = []
    for _ in range(n):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    return np.median(ts) * 1e3
for name, fn in cases.items():
    net = M(fn)
    m = rlx.from_torch(net, (A, B), threads=2)
    feed = {m.inputs[0].name: A.numpy(), m.inputs[1].name: B.numpy()}
    r = med(lambda: m.run(feed))
    with torch.no_grad():
        t = med(lambda: net(A, B))
    print(f"{name:9s} rlx {r:7.3f} ms  torch {t:7.3f} ms  ratio {r / t:.2f}")
