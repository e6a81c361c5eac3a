# Work moved to a background thread: the forward returns at once and a thread it started fills the output.
import threading

import torch


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        done = threading.Event()

        def work():
            e = (x - x.max(dim=1, keepdim=True).values).exp()
            y.copy_(e / e.sum(dim=1, keepdim=True))
            done.set()
            threading.Event().wait(2)  # lingers after its work, as a pool worker would

        threading.Thread(target=work, daemon=True, name="ks-cheat-worker").start()
        done.wait()
        return y
