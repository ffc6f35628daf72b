"""The case list of the hostile suite: where files go, and what each case
runs. A case is an rlx command line that must fail cleanly; a control is one
that must succeed (it proves the good file a case was derived from works, so
each case fails for the defect it plants)."""
import os


class Suite:
    def __init__(self, root):
        self.root = root
        self.cases = []  # dicts: name, args, out (must not appear), names (must be in the message)
        self.controls = []  # dicts: name, args, out (must appear)

    def path(self, rel):
        p = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        return p

    def file(self, rel, data):
        p = self.path(rel)
        with open(p, "wb") as f:
            f.write(data)
        return p

    def out(self, name):
        """An output path a command is given; cases must never create it."""
        return self.path(os.path.join("out", name.replace("/", "_") + ".safetensors"))

    def case(self, name, args, names, out=None):
        """names: text the error message must contain, typically the hostile
        file's name, so the message says which file is wrong."""
        self.cases.append({"name": name, "args": args, "out": out, "names": names})

    def control(self, name, args, out=None):
        self.controls.append({"name": name, "args": args, "out": out})
