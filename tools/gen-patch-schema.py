#!/usr/bin/env python3
"""Generates patch/schema/table.rs: the strategic-merge-patch metadata (Go struct tags patchStrategy /
patchMergeKey) of every struct reachable from the kinds the sim serves, read from the k8s.io/api
and apimachinery Go sources."""
import os, re, sys

# The directory that holds k8s.io/ (argument 1; default: the Debian gocode tree the informer
# check caches).
GO_SRC_ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser(
    "~/.cache/kubeplex-informer-check/gocode/usr/share/gocode/src")
SRC = GO_SRC_ROOT + "/k8s.io/"
FILES = {
    "core": (SRC + "api/core/v1/types.go", {"metav1": "meta"}),
    "meta": (SRC + "apimachinery/pkg/apis/meta/v1/types.go", {}),
    "discovery": (SRC + "api/discovery/v1/types.go", {"v1": "core", "metav1": "meta"}),
    "events": (SRC + "api/events/v1/types.go", {"corev1": "core", "metav1": "meta"}),
    "apps": (SRC + "api/apps/v1/types.go", {"v1": "core", "metav1": "meta"}),
    "coordination": (SRC + "api/coordination/v1/types.go", {"metav1": "meta"}),
    "node": (SRC + "api/node/v1/types.go", {"corev1": "core", "metav1": "meta"}),
    "storage": (SRC + "api/storage/v1/types.go", {"v1": "core", "metav1": "meta"}),
    "networking": (SRC + "api/networking/v1/types.go", {"v1": "core", "metav1": "meta"}),
}
ROOTS = [
    ("", "pods", "core.Pod"), ("", "configmaps", "core.ConfigMap"), ("", "secrets", "core.Secret"),
    ("", "services", "core.Service"), ("", "namespaces", "core.Namespace"),
    ("", "nodes", "core.Node"), ("", "events", "core.Event"), ("", "endpoints", "core.Endpoints"),
    ("", "serviceaccounts", "core.ServiceAccount"),
    ("apps", "deployments", "apps.Deployment"), ("apps", "replicasets", "apps.ReplicaSet"),
    ("discovery.k8s.io", "endpointslices", "discovery.EndpointSlice"),
    ("events.k8s.io", "events", "events.Event"),
    ("coordination.k8s.io", "leases", "coordination.Lease"),
    ("node.k8s.io", "runtimeclasses", "node.RuntimeClass"),
    ("storage.k8s.io", "csidrivers", "storage.CSIDriver"),
    ("networking.k8s.io", "servicecidrs", "networking.ServiceCIDR"),
]

structs = {}   # "pkg.Name" -> list of (jsonname|None for inline, typeexpr, pkg, strategy, key)
aliases = {}   # "pkg.Name" -> typeexpr (non-struct named types)
for pkg, (path, imports) in FILES.items():
    text = open(path).read()
    for m in re.finditer(r"^type (\w+) struct \{\n(.*?)^\}", text, re.S | re.M):
        name, body = m.group(1), m.group(2)
        fields = []
        for line in body.split("\n"):
            line = line.strip()
            if not line or line.startswith("//"):
                continue
            if "`" not in line:
                continue
            head, tag = line.split("`", 1)
            toks = head.split()
            if len(toks) == 1:
                fname, ty, embedded = None, toks[0], True
            elif len(toks) == 2:
                fname, ty, embedded = toks[0], toks[1], False
            else:
                continue
            jm = re.search(r'json:"([^"]*)"', tag)
            if not jm:
                continue
            jname = jm.group(1).split(",")[0]
            if jname == "-":
                continue
            if not jname:
                jname = None if embedded else fname
            strat = re.search(r'patchStrategy:"([^"]*)"', tag)
            key = re.search(r'patchMergeKey:"([^"]*)"', tag)
            fields.append((jname, ty, imports, strat.group(1) if strat else "",
                           key.group(1) if key else ""))
        structs[pkg + "." + name] = (pkg, fields)
    for m in re.finditer(r"^type (\w+) ([\w\.\*\[\]]+)\s*$", text, re.M):
        aliases[pkg + "." + m.group(1)] = (pkg, m.group(2))

def resolve(pkg, imports, ty):
    """-> ('struct', name) | ('slice', elem) | ('scalar',) | ('map',)"""
    if ty.startswith("*"):
        return resolve(pkg, imports, ty[1:])
    if ty.startswith("[]"):
        inner = ty[2:]
        if inner == "byte":
            return ("scalar",)
        return ("slice", resolve(pkg, imports, inner))
    if ty.startswith("map["):
        return ("map",)
    if "." in ty:
        p, n = ty.split(".", 1)
        if p not in imports:
            return ("scalar",)  # resource.Quantity, intstr.IntOrString, types.UID, runtime.RawExtension...
        full = imports[p] + "." + n
        p2 = imports[p]
        imp2 = FILES[p2][1]
    else:
        full = pkg + "." + ty
        p2, imp2 = pkg, FILES[pkg][1]
    if full in ("meta.Time", "meta.MicroTime", "meta.Duration", "meta.FieldsV1"):
        return ("scalar",)  # custom JSON marshalling: not objects on the wire (FieldsV1 is opaque)
    if full in structs:
        return ("struct", full)
    if full in aliases:
        return resolve(p2, imp2, aliases[full][1])
    return ("scalar",)

out = {}  # struct -> list of (json, kind, strategy, key)
def visit(name):
    if name in out:
        return
    out[name] = []
    pkg, fields = structs[name]
    def add(fields_of, pkg_of):
        for jname, ty, imports, strat, key in fields_of:
            r = resolve(pkg_of, imports, ty)
            if jname is None:  # inline embedded struct: its fields are promoted
                if r[0] == "struct":
                    add(structs[r[1]][1], structs[r[1]][0])
                continue
            if r[0] == "struct":
                out[name].append((jname, "Struct", r[1], strat, key))
                visit(r[1])
            elif r[0] == "slice":
                el = r[1]
                if el[0] == "struct":
                    out[name].append((jname, "List", el[1], strat, key))
                    visit(el[1])
                elif strat:
                    out[name].append((jname, "List", None, strat, key))
            elif strat:
                raise SystemExit(f"{name}.{jname}: strategy on a {r[0]} field is not supported")
    add(fields, pkg)

for _, _, root in ROOTS:
    visit(root)

# Keep only what changes the merge: a strategy tag, or a struct field leading to one.
changed = True
interesting = set()
while changed:
    changed = False
    for name, fields in out.items():
        if name in interesting:
            continue
        for jname, shape, elem, strat, key in fields:
            if strat or (shape == "Struct" and elem in interesting):
                interesting.add(name)
                changed = True
                break
pruned = {}
for name in interesting:
    keep = []
    for jname, shape, elem, strat, key in out[name]:
        if strat:
            keep.append((jname, shape, elem if elem in interesting else None, strat, key))
        elif shape == "Struct" and elem in interesting:
            keep.append((jname, shape, elem, strat, key))
    pruned[name] = keep
roots = {r for _, _, r in ROOTS}
for r in roots:
    pruned.setdefault(r, [])
out = pruned

def strategy(s):
    return {"": "Strategy::None", "merge": "Strategy::Merge", "replace": "Strategy::Replace",
            "retainKeys": "Strategy::None", "merge,retainKeys": "Strategy::MergeRetainKeys",
            "retainKeys,merge": "Strategy::MergeRetainKeys"}[s]

print("""//! GENERATED by `tools/gen-patch-schema.py` (see patch/schema/mod.rs) from the Go sources
//! of k8s.io/api and k8s.io/apimachinery v0.36: do not edit by hand.
//!
//! For every Go struct reachable from the kinds the sim serves, the JSON fields the strategic
//! merge patch needs to know about: fields holding a struct (to recurse into them with the right
//! schema), lists of structs (element schema), and any field carrying a `patchStrategy` tag.
//! Fields absent from a struct's row are scalars, maps of scalars, or lists without a strategy:
//! the patch replaces those as a whole (maps are merged key by key).
//!
//! Inline (embedded) structs such as `Volume`'s `VolumeSource` are flattened into their parent,
//! the way encoding/json promotes their fields.

use super::{FieldMeta, FieldShape, Strategy};

/// `(group, resource)` of each served kind, and the Go struct its objects decode into.
pub(super) const ROOTS: &[(&str, &str, &str)] = &[""")
for g, r, t in ROOTS:
    print(f'    ("{g}", "{r}", "{t}"),')
print("];\n")
print("/// `(struct, fields)`, sorted by struct name; each struct's fields sorted by JSON name.")
print("pub(super) const STRUCTS: &[(&str, &[FieldMeta])] = &[")
for name in sorted(out):
    print(f'    ("{name}", &[')
    for jname, shape, elem, strat, key in sorted(out[name]):
        sh = {"Struct": "FieldShape::Struct", "List": "FieldShape::List"}[shape]
        el = f'"{elem}"' if elem else '""'
        print(f'        FieldMeta {{ json: "{jname}", shape: {sh}, ty: {el}, strategy: {strategy(strat)}, merge_key: "{key}" }},')
    print("    ]),")
print("];")
