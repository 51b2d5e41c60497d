"""apicheck: keep the hand-written API pages true to the sources.

The pages are written by hand (the Python package is a compiled extension and
the docs build must not need it), so nothing would stop them from drifting
away from the code. This extension reads the sources as text - the C headers
(capi/include/tether/*.h), the C++ wrapper (tether.hpp) and the Python package
(python/tether/*.py, through ``ast``; nothing is imported) - and, after all
pages are read, warns about

* C: a declared function whose signature differs from the header's, a header
  function, macro, type, struct member or enumerator that is not documented
  (or documented but not in the headers), an enumerator with the wrong value;
* C++: a documented name that the wrapper (tether.hpp and the per-module
  headers it includes, capi/include/tether/cpp/*.hpp, and the opt-in
  tether/*.hpp beside it such as thrust.hpp) does not declare, and a
  public declaration there (one with a ``///`` comment) that is not documented;
* Python: a documented ``tether.*`` object the package does not define, a
  public name (``__all__``, a class's public members) that is not documented,
  and a signature whose parameters or defaults differ from the code - for the
  package and for each public submodule with an ``__all__`` (the hooks:
  ``tether.cupy``, ``tether.numba`` ...; their classes' own public members
  too, not what they inherit from the other library).

It also warns when the umbrella headers miss a module: tether/tether.h must
include every tether/*.h, tether/tether.hpp every tether/cpp/*.hpp.

Every page counts: the reference pages (c_api, cpp_api, python_api) and the
per-type pages under docs/resources/ alike, so a resource type may document
its API on its own page.

Run the build with ``-W`` and each warning fails it.
"""

from __future__ import annotations

import ast
import glob
import hashlib
import os
import re

from docutils import nodes
from sphinx import addnodes
from sphinx.util import logging

logger = logging.getLogger(__name__)

_TOKEN = re.compile(r"\w+|[^\s\w]")


def _tokens(text: str) -> list[str]:
    """A declaration as tokens, so spacing and line breaks do not matter."""
    return _TOKEN.findall(text)


def _strip_c_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


# ---------------------------------------------------------------------------
# What the sources declare
# ---------------------------------------------------------------------------

class CHeaders:
    """Public C declarations of capi/include/tether/*.h."""

    def __init__(self, include_dir: str) -> None:
        self.functions: dict[str, list[str]] = {}   # name -> signature tokens
        self.macros: set[str] = set()
        self.types: set[str] = set()                # typedef names (tether_*_t)
        self.structs: dict[str, list[str]] = {}     # struct tag -> member names
        self.enums: dict[str, dict[str, int]] = {}  # enum tag -> enumerator -> value
        for path in sorted(glob.glob(os.path.join(include_dir, "*.h"))):
            with open(path, encoding="utf-8") as f:
                self._parse(f.read())

    def _parse(self, raw: str) -> None:
        for m in re.finditer(r"^\s*#\s*define\s+(TETHER_\w+)", raw, flags=re.M):
            if not m.group(1).endswith("_H"):  # include guards
                self.macros.add(m.group(1))
        text = _strip_c_comments(raw)
        text = re.sub(r"^\s*#[^\n]*", " ", text, flags=re.M)
        for m in re.finditer(r"\bTETHER_API\s+([^;{}]*?\b(tether_\w+)\s*\([^;{}]*\))\s*;", text):
            self.functions[m.group(2)] = _tokens(m.group(1))
        for m in re.finditer(r"typedef\s+(struct|enum)\s+(tether_\w+)\s*\{(.*?)\}\s*(tether_\w+_t)\s*;", text, flags=re.S):
            kind, tag, body, name = m.groups()
            self.types.add(name)
            if kind == "struct":
                # A member's name is its last word (arrays: before "[N]"), or (function
                # pointers) the one in "(*name)".
                self.structs[tag] = [fp.group(1) if (fp := re.search(r"\(\s*\*\s*(\w+)\s*\)", decl))
                                     else re.findall(r"\w+", re.sub(r"\[[^\]]*\]", " ", decl))[-1]
                                     for decl in body.split(";") if re.search(r"\w", decl)]
            else:
                self.enums[tag] = {e: int(v) for e, v in re.findall(r"(TETHER_\w+)\s*=\s*(\d+)", body)}
        for m in re.finditer(r"typedef\s+[^;{}]*?\b(tether_\w+_t)\s*;", text):
            self.types.add(m.group(1))
        for m in re.finditer(r"typedef\s+[^;{}()]*\(\s*\*\s*(tether_\w+_t)\s*\)", text):  # function pointer types
            self.types.add(m.group(1))


class CppHeader:
    """Public names of the C++ wrapper (tether.hpp and cpp/*.hpp): every declaration
    preceded by a ``///`` comment."""

    def __init__(self, paths: list[str]) -> None:
        raw = ""
        for path in paths:
            with open(path, encoding="utf-8") as f:
                raw += f.read() + "\n"
        self.text = raw
        self.macros = {m for m in re.findall(r"^\s*#\s*define\s+(TETHER_\w+)", raw, flags=re.M)
                       if not m.endswith("_HPP")}
        # Drop the implementation details (namespace detail { ... }).
        public = re.sub(r"namespace detail \{.*?\}\s*// namespace detail", "", raw, flags=re.S)
        self.documented_decls: set[str] = set()
        lines = public.splitlines()
        for i, line in enumerate(lines):
            if not line.strip().startswith("///"):
                continue
            if i + 1 < len(lines) and lines[i + 1].strip().startswith("///"):
                continue  # not the last line of the comment
            decl = lines[i + 1].strip() if i + 1 < len(lines) else ""
            name = self._declared_name(decl)
            if name:
                self.documented_decls.add(name)

    @staticmethod
    def _declared_name(decl: str) -> str | None:
        decl = re.sub(r"^template\s*<.*?>\s*", "", decl)
        m = re.match(r"(?:class|struct)\s+(\w+)", decl)
        if m:
            return m.group(1)
        m = re.match(r"using\s+(\w+)\s*=", decl)
        if m:
            return m.group(1)
        m = re.search(r"\b(operator\s*(?:==|!=|bool))", decl)
        if m:
            return m.group(1).replace(" ", "")
        if "(" in decl:
            m = re.search(r"(~?\w+)\s*\(", decl)
            return m.group(1) if m else None
        m = re.search(r"\b(\w+)\s*=", decl)
        return m.group(1) if m else None

    def declares(self, name: str) -> bool:
        if name.startswith("operator"):
            return name.replace(" ", "") in self.text.replace(" ", "")
        return re.search(rf"(?<![\w~]){re.escape(name)}\b" if not name.startswith("~")
                         else re.escape(name) + r"\s*\(", self.text) is not None


class PyPackage:
    """Public names, classes and signatures of python/tether, read with ast.

    Members the package derives from the C headers at import are derived here
    the same way: a class based on ``struct_tuple("tether_x_t")`` has the fields
    of that C struct (without struct_size), and a class whose body reads
    ``_constants("TETHER_X_")`` (ResourceKind) has one member per enumerator
    with that prefix.
    """

    def __init__(self, package_dir: str, c: CHeaders | None = None) -> None:
        self.c = c
        self.modules: dict[str, ast.Module] = {}
        for path in sorted(glob.glob(os.path.join(package_dir, "*.py"))):
            name = os.path.splitext(os.path.basename(path))[0]
            with open(path, encoding="utf-8") as f:
                self.modules[name] = ast.parse(f.read(), filename=path)
        self.classes: dict[str, ast.ClassDef] = {}
        self.functions: dict[str, ast.FunctionDef] = {}  # "name" or "debug.name"
        # Public submodules with an __all__ (tether.cupy, ...): checked on their own, as
        # tether.<module>.<name>; their classes stay out of the package's namespace.
        self.submodules: dict[str, dict[str, ast.AST]] = {}
        for mod_name, mod in self.modules.items():
            if not mod_name.startswith("_") and mod_name != "debug" and self._all(mod_name):
                self.submodules[mod_name] = {n.name: n for n in mod.body
                                             if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
        for mod_name, mod in self.modules.items():
            if mod_name in self.submodules:
                continue
            for node in mod.body:
                if isinstance(node, ast.ClassDef):
                    self.classes[node.name] = node
                elif isinstance(node, ast.FunctionDef) and mod_name in ("__init__", "debug"):
                    key = node.name if mod_name == "__init__" else f"debug.{node.name}"
                    self.functions[key] = node
        for mod_name in sorted(m for m in self.modules if m.startswith("_") and m != "__init__"):
            for node in self.modules[mod_name].body:
                if isinstance(node, ast.FunctionDef):
                    self.functions.setdefault(node.name, node)
        self.all = self._all("__init__")
        self.debug_all = self._all("debug")
        # Constructors take defaults from the generated registry module (_kinds.X): the
        # docs write the value, so compare with the value.
        for node in self.modules.get("_kinds", ast.Module(body=[])).body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                _KINDS_CONSTANTS[f"_kinds.{node.target.id}"] = ast.unparse(node.value)

    def _all(self, module: str) -> list[str]:
        """A module's __all__: its literal, plus `__all__ += _other.__all__` (tether's _kind_classes)."""
        names: list[str] = []
        for node in self.modules.get(module, ast.Module(body=[])).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
                names = list(ast.literal_eval(node.value))
            elif (isinstance(node, ast.AugAssign) and getattr(node.target, "id", None) == "__all__"
                  and isinstance(node.value, ast.Attribute) and isinstance(node.value.value, ast.Name)):
                names += self._all(node.value.value.id)
        return names

    def bases(self, cls: str) -> list[str]:
        node = self.classes.get(cls)
        if node is None:
            return []
        return [b.id for b in node.bases if isinstance(b, ast.Name) and b.id in self.classes]

    def ancestry(self, cls: str) -> list[str]:
        """cls and its in-package base classes, nearest first."""
        out, todo = [], [cls]
        while todo:
            c = todo.pop(0)
            if c not in out:
                out.append(c)
                todo.extend(self.bases(c))
        return out

    def own_members(self, cls: str) -> dict[str, ast.AST]:
        node = self.classes.get(cls)
        members: dict[str, ast.AST] = {}
        if node is None:
            return members
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                members[item.name] = item
            elif isinstance(item, ast.Assign):
                for t in item.targets:
                    if isinstance(t, ast.Name):
                        members[t.id] = item
            elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                members[item.target.id] = item
        for name in self._derived_members(node):
            members.setdefault(name, node)
        return members

    def _derived_members(self, node: ast.ClassDef) -> list[str]:
        if self.c is None:
            return []
        out: list[str] = []
        for base in node.bases:
            if (isinstance(base, ast.Call) and getattr(base.func, "id", None) == "struct_tuple"
                    and base.args and isinstance(base.args[0], ast.Constant)):
                tag = str(base.args[0].value)[:-2]  # tether_pool_info_t -> tether_pool_info
                out += [f for f in self.c.structs.get(tag, []) if f != "struct_size"]
        for sub in ast.walk(node):
            if (isinstance(sub, ast.Call) and getattr(sub.func, "id", None) == "_constants"
                    and sub.args and isinstance(sub.args[0], ast.Constant)):
                prefix = str(sub.args[0].value)
                out += [e[len(prefix):] for values in self.c.enums.values() for e in values if e.startswith(prefix)]
        return out

    def member(self, cls: str, name: str) -> ast.AST | None:
        for c in self.ancestry(cls):
            m = self.own_members(c).get(name)
            if m is not None:
                return m
        return None

    def public_members(self, cls: str) -> dict[str, str]:
        """Public member name -> the class (cls or an ancestor) that defines it."""
        out: dict[str, str] = {}
        for c in reversed(self.ancestry(cls)):
            for name in self.own_members(c):
                if not name.startswith("_"):
                    out[name] = c
        out.pop("__slots__", None)
        return out


_KINDS_CONSTANTS: dict[str, str] = {}  # "_kinds.NAME" -> its value, as ast.unparse writes it


def _default_text(d: ast.expr) -> str:
    text = ast.unparse(d)
    return _KINDS_CONSTANTS.get(text, text)


def _signature(fn: ast.FunctionDef, drop_first: bool) -> list[tuple[str, str | None]]:
    """[(name or '*' or '/', default)] of a function, as the docs would write it."""
    a = fn.args
    positional = a.posonlyargs + a.args
    defaults = [None] * (len(positional) - len(a.defaults)) + [_default_text(d) for d in a.defaults]
    out: list[tuple[str, str | None]] = []
    for i, (arg, d) in enumerate(zip(positional, defaults)):
        out.append((arg.arg, d))
        if a.posonlyargs and i == len(a.posonlyargs) - 1:
            out.append(("/", None))
    if a.vararg:
        out.append(("*" + a.vararg.arg, None))
    elif a.kwonlyargs:
        out.append(("*", None))
    for arg, d in zip(a.kwonlyargs, a.kw_defaults):
        out.append((arg.arg, None if d is None else _default_text(d)))
    if a.kwarg:
        out.append(("**" + a.kwarg.arg, None))
    if drop_first and out:
        out.pop(0)
    return out


# ---------------------------------------------------------------------------
# What the pages document
# ---------------------------------------------------------------------------

def _doc_params(sig: addnodes.desc_signature) -> list[tuple[str, str | None]] | None:
    plist = next(iter(sig.findall(addnodes.desc_parameterlist)), None)
    if plist is None:
        return None
    out = []
    for p in plist.findall(addnodes.desc_parameter):
        names = [n.astext() for n in p.findall(addnodes.desc_sig_name)]
        ops = "".join(n.astext() for n in p.findall(addnodes.desc_sig_operator))
        default = next((n.astext() for n in p.findall(nodes.inline) if "default_value" in n["classes"]), None)
        if names:
            prefix = "**" if ops.startswith("**") else "*" if ops.startswith("*") else ""
            out.append((prefix + names[0], default))
        else:
            out.append((ops.strip() or p.astext().strip(), None))
    return out


def _location(node: nodes.Node, docname: str):
    return (docname, node.line) if node.line else docname


def check(app, env) -> None:
    root = app.config.apicheck_root
    c = CHeaders(os.path.join(root, "capi", "include", "tether"))
    cpp = CppHeader(_cpp_headers(root))
    py = PyPackage(os.path.join(root, "python", "tether"), c)

    doc_c: dict[str, tuple[str, str, nodes.Node]] = {}  # name -> (objtype, docname, sig)
    doc_cpp: set[str] = set()
    doc_py: dict[str, tuple[str, str, nodes.Node]] = {}
    for docname in sorted(env.found_docs):
        doctree = env.get_doctree(docname)
        for desc in doctree.findall(addnodes.desc):
            domain, objtype = desc.get("domain"), desc.get("objtype")
            if desc.get("no-index") or desc.get("noindex"):
                continue
            for sig in desc.children:
                if not isinstance(sig, addnodes.desc_signature):
                    continue
                if domain == "c":
                    ids = [i for i in sig["ids"] if i.startswith("c.")]
                    if ids:
                        doc_c[ids[0][2:]] = (objtype, docname, sig)
                elif domain == "cpp":
                    for n in sig.findall(addnodes.desc_name):
                        doc_cpp.add(n.astext().replace(" ", ""))
                elif domain == "py":
                    full = ".".join(x for x in (sig.get("module"), sig.get("fullname")) if x)
                    doc_py[full] = (objtype, docname, sig)

    _check_umbrellas(root)
    _check_c(c, cpp, doc_c)
    _check_cpp(cpp, doc_cpp)
    _check_py(py, doc_py)


def _check_umbrellas(root: str) -> None:
    """tether/tether.h includes every tether/*.h, and tether/tether.hpp every tether/cpp/*.hpp:
    a module left out of its umbrella would be missing for users (and from the Python cdef)."""
    inc = os.path.join(root, "capi", "include", "tether")
    for umbrella, pattern, prefix in (("tether.h", "*.h", "tether/"), ("tether.hpp", os.path.join("cpp", "*.hpp"), "tether/cpp/")):
        with open(os.path.join(inc, umbrella), encoding="utf-8") as f:
            included = set(re.findall(r'^\s*#\s*include\s*"([^"]+)"', _strip_c_comments(f.read()), flags=re.M))
        for path in sorted(glob.glob(os.path.join(inc, pattern))):
            name = prefix + os.path.basename(path)
            if os.path.basename(path) != umbrella and name not in included:
                logger.warning(f"apicheck: tether/{umbrella} does not include {name}", type="apicheck")


def _check_c(c: CHeaders, cpp: CppHeader, doc: dict) -> None:
    def warn(msg, where=None):
        logger.warning("apicheck: " + msg, location=where, type="apicheck")

    want: dict[str, str] = {}
    for f in c.functions:
        want[f] = "function"
    for m in c.macros | cpp.macros:
        want[m] = "macro"
    for t in c.types:
        want[t] = "type"
    for tag, members in c.structs.items():
        want[tag] = "struct"
        for m in members:
            want[f"{tag}.{m}"] = "member"
    for tag, values in c.enums.items():
        want[tag] = "enum"
        for e in values:
            want[f"{tag}.{e}"] = "enumerator"

    for name, objtype in sorted(want.items()):
        if name not in doc:
            warn(f"C {objtype} {name} is in the headers but not documented")
            continue
        dtype, docname, sig = doc[name]
        where = _location(sig, docname)
        if dtype != objtype:
            warn(f"{name} is a {objtype} in the headers but documented as a {dtype}", where)
        if objtype == "function":
            got = _tokens(sig.astext())
            if got != c.functions[name]:
                warn(f"signature of {name} differs from the header:\n  header: {' '.join(c.functions[name])}"
                     f"\n  docs:   {' '.join(got)}", where)
        if objtype == "enumerator":
            tag, e = name.split(".")
            m = re.search(r"=\s*(\d+)", sig.astext())
            if m is None or int(m.group(1)) != c.enums[tag][e]:
                warn(f"enumerator {e} must be documented as '{e} = {c.enums[tag][e]}'", where)
    for name, (dtype, docname, sig) in sorted(doc.items()):
        if name not in want:
            warn(f"documented C {dtype} {name} does not exist in the headers", _location(sig, docname))


def _check_cpp(cpp: CppHeader, doc: set[str]) -> None:
    for name in sorted(doc):
        if not cpp.declares(name):
            logger.warning(f"apicheck: documented C++ name {name} is not declared in the C++ wrapper (tether.hpp, "
                           "cpp/*.hpp)", type="apicheck")
    for name in sorted(cpp.documented_decls):
        plain = name.lstrip("~")
        if name not in doc and plain not in doc:
            logger.warning(f"apicheck: the C++ wrapper declares {name} (with a /// comment) but no page documents it",
                           type="apicheck")


def _check_py(py: PyPackage, doc: dict) -> None:
    def warn(msg, where=None):
        logger.warning("apicheck: " + msg, location=where, type="apicheck")

    for name in py.all:
        if name == "debug":
            if not any(k.startswith("tether.debug.") for k in doc):
                warn("tether.debug is public but none of its functions is documented")
        elif f"tether.{name}" not in doc:
            warn(f"tether.{name} is in tether.__all__ but not documented")
    for name in py.debug_all:
        if f"tether.debug.{name}" not in doc:
            warn(f"tether.debug.{name} is in tether.debug.__all__ but not documented")
    for mod in sorted(py.submodules):
        for name in py._all(mod):
            if f"tether.{mod}.{name}" not in doc:
                warn(f"tether.{mod}.{name} is in tether.{mod}.__all__ but not documented")

    documented_classes = {k[len("tether."):] for k, (t, _, _) in doc.items()
                          if t in ("class", "exception") and k.count(".") == 1}
    for full, (objtype, docname, sig) in sorted(doc.items()):
        where = _location(sig, docname)
        parts = full.split(".")
        if parts[0] != "tether":
            warn(f"documented Python object {full} is outside the tether package", where)
            continue
        if len(parts) >= 3 and parts[1] in py.submodules:
            _check_submodule_object(py, parts[1], parts[2:], objtype, sig, doc, warn, where)
            continue
        if len(parts) == 2:
            name = parts[1]
            if name not in py.all:
                warn(f"documented tether.{name} is not in tether.__all__", where)
                continue
            if objtype in ("class", "exception"):
                cls = py.classes.get(name)
                if cls is None:
                    warn(f"tether.{name} is documented as a class but is not one", where)
                    continue
                init = py.member(name, "__init__")
                params = _doc_params(sig)
                if isinstance(init, ast.FunctionDef) and objtype == "class":
                    _compare(full, _signature(init, True), params, warn, where)
            elif objtype == "function":
                fn = py.functions.get(name)
                if fn is None:
                    warn(f"tether.{name} is documented as a function but is not one", where)
                else:
                    _compare(full, _signature(fn, False), _doc_params(sig), warn, where)
        elif parts[1] == "debug" and len(parts) == 3:
            fn = py.functions.get(f"debug.{parts[2]}")
            if parts[2] not in py.debug_all or fn is None:
                warn(f"documented {full} is not a public function of tether.debug", where)
            else:
                _compare(full, _signature(fn, False), _doc_params(sig), warn, where)
        elif len(parts) == 3:
            cls, member = parts[1], parts[2]
            node = py.member(cls, member)
            if node is None:
                warn(f"documented {full}: {cls} has no member {member}", where)
                continue
            if objtype == "method":
                if not isinstance(node, ast.FunctionDef):
                    warn(f"{full} is documented as a method but is not one", where)
                    continue
                _compare(full, _signature(node, True), _doc_params(sig), warn, where)
            elif objtype == "property":
                if not (isinstance(node, ast.FunctionDef)
                        and any(getattr(d, "id", None) == "property" for d in node.decorator_list)):
                    warn(f"{full} is documented as a property but is not one", where)
        else:
            warn(f"documented Python object {full} is nested too deeply to check", where)

    for cls in sorted(documented_classes):
        if cls not in py.classes:
            continue
        for member, owner in sorted(py.public_members(cls).items()):
            if not any(f"tether.{c}.{member}" in doc for c in py.ancestry(cls) if c in documented_classes):
                warn(f"tether.{cls}.{member} is public (defined in {owner}) but not documented")


def _check_submodule_object(py: PyPackage, mod: str, path: list[str], objtype: str, sig, doc: dict,
                            warn, where) -> None:
    """A documented tether.<mod>.<name> or tether.<mod>.<Class>.<member> of a public submodule."""
    full = ".".join(["tether", mod] + path)
    names = py.submodules[mod]
    node = names.get(path[0])
    if path[0] not in py._all(mod) or node is None:
        warn(f"documented {full}: tether.{mod}.__all__ has no function or class {path[0]}", where)
        return
    if len(path) == 1:
        if objtype in ("class", "exception"):
            if not isinstance(node, ast.ClassDef):
                warn(f"{full} is documented as a class but is not one", where)
                return
            init = next((i for i in node.body if isinstance(i, ast.FunctionDef) and i.name == "__init__"), None)
            if init is not None:
                _compare(full, _signature(init, True), _doc_params(sig), warn, where)
            for item in node.body:  # the class's own public members (not the other library's)
                member = getattr(item, "name", None)
                if member and not member.startswith("_") and f"{full}.{member}" not in doc:
                    warn(f"{full}.{member} is public but not documented")
        elif objtype == "function":
            if not isinstance(node, ast.FunctionDef):
                warn(f"{full} is documented as a function but is not one", where)
            else:
                _compare(full, _signature(node, False), _doc_params(sig), warn, where)
        return
    if len(path) != 2 or not isinstance(node, ast.ClassDef):
        warn(f"documented Python object {full} is nested too deeply to check", where)
        return
    member = next((i for i in node.body if getattr(i, "name", None) == path[1]), None)
    if member is None:
        warn(f"documented {full}: tether.{mod}.{path[0]} has no member {path[1]}", where)
    elif objtype == "method":
        if not isinstance(member, ast.FunctionDef):
            warn(f"{full} is documented as a method but is not one", where)
        else:
            _compare(full, _signature(member, True), _doc_params(sig), warn, where)
    elif objtype == "property":
        if not (isinstance(member, ast.FunctionDef)
                and any(getattr(d, "id", None) == "property" for d in member.decorator_list)):
            warn(f"{full} is documented as a property but is not one", where)


def _normalize_default(text: str | None) -> str | None:
    """A default value as ast.unparse writes it ("x" and 'x' are the same default)."""
    if text is None:
        return None
    try:
        return ast.unparse(ast.parse(text, mode="eval"))
    except SyntaxError:
        return text


def _compare(full, code, docs, warn, where) -> None:
    if docs is None:
        docs = []
    docs = [(n, _normalize_default(d)) for n, d in docs]
    if code != docs:
        fmt = lambda ps: ", ".join(n if d is None else f"{n}={d}" for n, d in ps)  # noqa: E731
        warn(f"signature of {full} differs from the code:\n  code: ({fmt(code)})\n  docs: ({fmt(docs)})", where)


def _cpp_headers(root: str) -> list[str]:
    """tether.hpp, the per-module wrapper headers it includes, and the opt-in wrapper
    headers beside it (tether/thrust.hpp: not in the umbrella, it needs Thrust)."""
    inc = os.path.join(root, "capi", "include", "tether")
    opt_in = sorted(p for p in glob.glob(os.path.join(inc, "*.hpp")) if os.path.basename(p) != "tether.hpp")
    return [os.path.join(inc, "tether.hpp")] + sorted(glob.glob(os.path.join(inc, "cpp", "*.hpp"))) + opt_in


def _sources(root: str) -> list[str]:
    return sorted(glob.glob(os.path.join(root, "capi", "include", "tether", "*.h*"))
                  + glob.glob(os.path.join(root, "capi", "include", "tether", "cpp", "*.hpp"))
                  + glob.glob(os.path.join(root, "python", "tether", "*.py")))


def _fingerprint(root: str) -> str:
    h = hashlib.sha256()
    for path in _sources(root):
        h.update(path.encode())
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def outdated(app, env, added, changed, removed):
    """Re-read every page when a checked source changed, so that check() runs again."""
    fp = _fingerprint(app.config.apicheck_root)
    if getattr(env, "apicheck_fingerprint", None) != fp:
        env.apicheck_fingerprint = fp
        return sorted(env.found_docs)
    return []


def setup(app):
    app.connect("env-get-outdated", outdated)
    app.add_config_value("apicheck_root", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "env")
    app.connect("env-check-consistency", check)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
