#!/usr/bin/env python3
"""Generate crates/kubeplex-wire/src/codec/schema_gen.rs from the Go sources of the Kubernetes API types.

The wire crate's codec (which the fake apiserver serves with) must write objects exactly as
kube-apiserver does, and everything needed for that is in the Go struct definitions: field
order (JSON output order), the `json:` tag (name, omitempty, omitzero, inline), the `protobuf:`
tag (field number) and the Go type (pointer, slice, map, struct), which decides what Go's
encoding/json and gogo-protobuf write.

Usage: tools/gen-schema.py [GO_SRC_ROOT] > crates/kubeplex-wire/src/codec/schema_gen.rs
       tools/gen-schema.py --check [GO_SRC_ROOT]   (compare with gogo's generated.pb.go)
GO_SRC_ROOT is the directory that holds k8s.io/ (default: the Debian gocode tree cached by the
informer check). Python 3 standard library only; the output is committed so that CI needs no
Go sources.
"""

import os
import re
import sys

DEFAULT_ROOT = os.path.expanduser("~/.cache/kubeplex-informer-check/gocode/usr/share/gocode/src")

# Package id -> files (relative to GO_SRC_ROOT) whose struct definitions we read.
PACKAGES = {
    "meta/v1": ["k8s.io/apimachinery/pkg/apis/meta/v1/types.go",
                "k8s.io/apimachinery/pkg/apis/meta/v1/watch.go"],
    "core/v1": ["k8s.io/api/core/v1/types.go"],
    "discovery/v1": ["k8s.io/api/discovery/v1/types.go"],
    "apps/v1": ["k8s.io/api/apps/v1/types.go"],
    "coordination/v1": ["k8s.io/api/coordination/v1/types.go"],
    "node/v1": ["k8s.io/api/node/v1/types.go"],
    "storage/v1": ["k8s.io/api/storage/v1/types.go"],
    "networking/v1": ["k8s.io/api/networking/v1/types.go"],
}

# Import path -> package id, for the packages above.
IMPORTS = {
    "k8s.io/apimachinery/pkg/apis/meta/v1": "meta/v1",
    "k8s.io/api/core/v1": "core/v1",
    "k8s.io/api/discovery/v1": "discovery/v1",
    "k8s.io/api/apps/v1": "apps/v1",
    "k8s.io/api/coordination/v1": "coordination/v1",
    "k8s.io/api/node/v1": "node/v1",
    "k8s.io/api/storage/v1": "storage/v1",
    "k8s.io/api/networking/v1": "networking/v1",
    "k8s.io/apimachinery/pkg/api/resource": "resource",
    "k8s.io/apimachinery/pkg/types": "types",
    "k8s.io/apimachinery/pkg/util/intstr": "intstr",
    "k8s.io/apimachinery/pkg/runtime": "runtime",
}

# Types with hand-written JSON/protobuf marshalling: mapped to a leaf of the Rust `Ty` enum.
SPECIAL = {
    ("meta/v1", "Time"): "Time",
    ("meta/v1", "MicroTime"): "MicroTime",
    ("meta/v1", "Duration"): "Duration",
    ("meta/v1", "FieldsV1"): "FieldsV1",
    ("runtime", "RawExtension"): "RawExtension",
    ("resource", "Quantity"): "Quantity",
    ("intstr", "IntOrString"): "IntOrString",
    ("types", "UID"): "Str",
    ("types", "NodeName"): "Str",
}

BUILTIN = {"string": "Str", "bool": "Bool", "int32": "I32", "int64": "I64", "float64": "F64"}

# (api_version, kind, package, Go type) of every object the codec is asked to handle.
KINDS = [
    ("v1", kind, "core/v1", kind)
    for base in ["ConfigMap", "Pod", "Secret", "Service", "Namespace", "Node", "Event",
                 "Endpoints"]
    for kind in [base, base + "List"]
] + [
    ("discovery.k8s.io/v1", "EndpointSlice", "discovery/v1", "EndpointSlice"),
    ("discovery.k8s.io/v1", "EndpointSliceList", "discovery/v1", "EndpointSliceList"),
    ("apps/v1", "Deployment", "apps/v1", "Deployment"),
    ("apps/v1", "DeploymentList", "apps/v1", "DeploymentList"),
    ("apps/v1", "ReplicaSet", "apps/v1", "ReplicaSet"),
    ("apps/v1", "ReplicaSetList", "apps/v1", "ReplicaSetList"),
    # What node agents read besides the core kinds: the kubelet's Lease, RuntimeClasses and
    # CSIDrivers, kube-proxy's ServiceCIDRs.
    ("coordination.k8s.io/v1", "Lease", "coordination/v1", "Lease"),
    ("coordination.k8s.io/v1", "LeaseList", "coordination/v1", "LeaseList"),
    ("node.k8s.io/v1", "RuntimeClass", "node/v1", "RuntimeClass"),
    ("node.k8s.io/v1", "RuntimeClassList", "node/v1", "RuntimeClassList"),
    ("storage.k8s.io/v1", "CSIDriver", "storage/v1", "CSIDriver"),
    ("storage.k8s.io/v1", "CSIDriverList", "storage/v1", "CSIDriverList"),
    ("networking.k8s.io/v1", "ServiceCIDR", "networking/v1", "ServiceCIDR"),
    ("networking.k8s.io/v1", "ServiceCIDRList", "networking/v1", "ServiceCIDRList"),
    # Status is served as v1 by the core group and as meta.k8s.io/v1 elsewhere.
    ("v1", "Status", "meta/v1", "Status"),
    ("meta.k8s.io/v1", "Status", "meta/v1", "Status"),
    ("meta.k8s.io/v1", "PartialObjectMetadata", "meta/v1", "PartialObjectMetadata"),
    ("meta.k8s.io/v1", "PartialObjectMetadataList", "meta/v1", "PartialObjectMetadataList"),
    ("meta.k8s.io/v1", "WatchEvent", "meta/v1", "WatchEvent"),
]

FIELD_RE = re.compile(r"^(\w+)\s+(\S+)\s+`([^`]*)`$")
EMBED_RE = re.compile(r"^(\*?[\w.]+)\s+`([^`]*)`$")
TAG_RE = re.compile(r'(\w+):"([^"]*)"')


class GenError(Exception):
    pass


def strip_comment(line):
    # Struct bodies carry no string literals, only tags in backquotes; a `//` inside a tag
    # does not occur in these files.
    idx = line.find("//")
    return line if idx < 0 else line[:idx]


def parse_file(path):
    """Return (imports alias->pkg id, structs name->fields, named name->type expr)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    # Block comments never hold declarations; blank them out keeping line numbers.
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    lines = text.split("\n")
    imports = {}
    structs = {}
    named = {}
    i = 0
    while i < len(lines):
        line = strip_comment(lines[i]).strip()
        if line == "import (":
            i += 1
            while strip_comment(lines[i]).strip() != ")":
                parts = strip_comment(lines[i]).split()
                if parts:
                    ipath = parts[-1].strip('"')
                    alias = parts[0] if len(parts) == 2 else ipath.rsplit("/", 1)[-1]
                    if ipath in IMPORTS:
                        imports[alias] = IMPORTS[ipath]
                i += 1
        m = re.match(r"^type (\w+) struct \{$", line)
        if m:
            name = m.group(1)
            fields = []
            i += 1
            while strip_comment(lines[i]).rstrip() != "}":
                body = strip_comment(lines[i]).strip()
                if body:
                    fields.append(parse_field(body, f"{path}:{i + 1}"))
                i += 1
            structs[name] = fields
        else:
            m = re.match(r"^type (\w+) =?\s*(.+)$", line)
            if m and not m.group(2).startswith("struct") and not m.group(2).startswith(
                    "interface"):
                named[m.group(1)] = m.group(2).strip()
        i += 1
    return imports, structs, named


def parse_field(body, where):
    m = FIELD_RE.match(body)
    if m:
        go_name, typ, tags = m.groups()
        embedded = False
    else:
        m = EMBED_RE.match(body)
        if not m:
            raise GenError(f"{where}: cannot parse struct field {body!r}")
        typ, tags = m.groups()
        go_name = typ.lstrip("*").split(".")[-1]
        embedded = True
    tagmap = dict(TAG_RE.findall(tags))
    return {"go": go_name, "type": typ, "tags": tagmap, "embedded": embedded, "where": where}


class Model:
    def __init__(self, root):
        self.pkgs = {}
        for pkg, files in PACKAGES.items():
            imports, structs, named = {}, {}, {}
            for rel in files:
                im, st, nm = parse_file(os.path.join(root, rel))
                imports.update(im)
                structs.update(st)
                named.update(nm)
            self.pkgs[pkg] = {"imports": imports, "structs": structs, "named": named}
        self.emitted = {}  # (pkg, name) -> rust ident, in emission order
        self.order = []
        self.wire_notes = []
        self.go_fields = {}  # (pkg, name) -> [(Go field name, ty, proto number)]
        self.root = root

    def ident(self, pkg, name):
        prefix = pkg.replace("/", "_").upper()
        snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).upper()
        return f"{prefix}_{snake}"

    def resolve(self, pkg, expr, where):
        """Translate a Go type expression to a Rust `Ty` expression."""
        if expr.startswith("*"):
            return f"Ty::Ptr(&{self.resolve(pkg, expr[1:], where)})"
        if expr == "[]byte":
            return "Ty::Bytes"
        if expr.startswith("[]"):
            return f"Ty::Slice(&{self.resolve(pkg, expr[2:], where)})"
        if expr.startswith("map["):
            depth, j = 0, 3
            while True:
                c = expr[j]
                depth += c == "["
                depth -= c == "]"
                if depth == 0:
                    break
                j += 1
            key = self.resolve(pkg, expr[4:j], where)
            if key != "Ty::Str":
                raise GenError(f"{where}: map key {expr[4:j]} is not a string type")
            value = self.resolve(pkg, expr[j + 1:], where)
            return f"Ty::Map(&{value})"
        if expr in BUILTIN:
            return f"Ty::{BUILTIN[expr]}"
        if "." in expr:
            alias, name = expr.split(".", 1)
            target = self.pkgs[pkg]["imports"].get(alias)
            if target is None:
                raise GenError(f"{where}: unknown package {alias}")
            tpkg = target
        else:
            tpkg, name = pkg, expr
        if (tpkg, name) in SPECIAL:
            return f"Ty::{SPECIAL[(tpkg, name)]}"
        if tpkg not in self.pkgs:
            raise GenError(f"{where}: type {expr} from unsupported package {tpkg}")
        p = self.pkgs[tpkg]
        if name in p["structs"]:
            return f"Ty::Struct(&{self.struct_ident(tpkg, name)})"
        if name in p["named"]:
            return self.resolve(tpkg, p["named"][name], where)
        raise GenError(f"{where}: unknown type {expr}")

    def struct_ident(self, pkg, name):
        key = (pkg, name)
        if key not in self.emitted:
            self.emitted[key] = None  # placeholder breaks recursion on cyclic types
            self.emitted[key] = self.struct_def(pkg, name)
            self.order.append(key)
        return self.ident(pkg, name)

    def struct_def(self, pkg, name):
        out = []
        seen_json = set()
        for f in self.pkgs[pkg]["structs"][name]:
            where = f["where"]
            json_tag = f["tags"].get("json")
            if json_tag == "-":
                continue
            opts = json_tag.split(",") if json_tag is not None else [""]
            json_name, flags = opts[0], set(opts[1:])
            inline = f["embedded"] and json_name == ""
            if not inline and json_name == "":
                json_name = f["go"]
            if f["embedded"] and not inline and f["type"].startswith("*"):
                raise GenError(f"{where}: embedded pointer not supported")
            if inline and f["type"].startswith("*"):
                raise GenError(f"{where}: inline pointer not supported")
            proto = f["tags"].get("protobuf")
            num = int(proto.split(",")[1]) if proto else 0
            ty = self.resolve(pkg, f["type"], where)
            if inline and not ty.startswith("Ty::Struct("):
                raise GenError(f"{where}: inline field of non-struct type")
            if "omitzero" in flags:
                if ty not in ("Ty::Time", "Ty::MicroTime", "Ty::Str", "Ty::I32", "Ty::I64",
                              "Ty::Bool"):
                    raise GenError(f"{where}: omitzero on {ty} not supported")
                omit = "Omit::Zero"
            elif "omitempty" in flags:
                omit = "Omit::Empty"
            else:
                omit = "Omit::Never"
            if "string" in flags:
                raise GenError(f"{where}: json ,string option not supported")
            if not inline:
                if json_name in seen_json:
                    raise GenError(f"{where}: duplicate json name {json_name}")
                seen_json.add(json_name)
            if proto:
                self.wire_notes.extend(check_wire(proto.split(",")[0], ty, where))
            self.go_fields.setdefault((pkg, name), []).append((f["go"], ty, num))
            out.append((json_name if not inline else "", num, ty, omit, inline))
        return out

    def render(self):
        roots = []
        for api_version, kind, pkg, name in KINDS:
            roots.append((api_version, kind, self.struct_ident(pkg, name)))
        lines = [
            "// @generated by tools/gen-schema.py from the Go types of k8s.io/apimachinery",
            "// pkg/apis/meta/v1, k8s.io/api/core/v1, discovery/v1, apps/v1, coordination/v1, node/v1,",
            "// storage/v1 and networking/v1. Do not edit;",
            "// run `tools/gen-schema.py > crates/kubeplex-wire/src/codec/schema_gen.rs` instead.",
            "",
            "use super::schema::{Field, KindDef, Omit, StructDef, Ty};",
            "",
            "/// Every (apiVersion, kind) the codec knows, with its Go type.",
            "pub(super) static KINDS: &[KindDef] = &[",
        ]
        for api_version, kind, ident in roots:
            lines.append(f'    KindDef {{ api_version: "{api_version}", kind: "{kind}", '
                         f'def: &{ident} }},')
        lines.append("];")
        for key in sorted(self.order, key=lambda k: self.ident(*k)):
            pkg, name = key
            lines.append("")
            lines.append(f"pub(super) static {self.ident(pkg, name)}: StructDef = StructDef {{")
            lines.append(f'    name: "{name}",')
            lines.append("    fields: &[")
            for json_name, num, ty, omit, inline in self.emitted[key]:
                lines.append(f'        Field {{ json: "{json_name}", proto: {num}, ty: {ty}, '
                             f'omit: {omit}, inline: {"true" if inline else "false"} }},')
            lines.append("    ],")
            order = sorted((num, i) for i, (_, num, _, _, _) in enumerate(self.emitted[key])
                           if num)
            lines.append(f"    proto_order: &{[i for _, i in order]},")
            lines.append("};")
        return "\n".join(lines) + "\n"


def check_wire(wire, ty, where):
    leaf = ty
    while leaf.startswith(("Ty::Ptr(&", "Ty::Slice(&")):
        leaf = leaf[leaf.index("&") + 1:-1]
    want = {"Ty::Bool": "varint", "Ty::I32": "varint", "Ty::I64": "varint",
            "Ty::F64": "fixed64"}.get(leaf, "bytes")
    # gogo derives the wire type from the Go type, not from the tag (ListMeta's
    # remainingItemCount is tagged "bytes" but written as a varint), so a mismatch is only noted.
    if wire != want:
        return [f"{where}: tag says {wire}, Go type {ty} is written as {want}"]
    return []


# Packages whose generated.pb.go the --check mode reads.
PB_FILES = {
    "meta/v1": "k8s.io/apimachinery/pkg/apis/meta/v1/generated.pb.go",
    "core/v1": "k8s.io/api/core/v1/generated.pb.go",
    "discovery/v1": "k8s.io/api/discovery/v1/generated.pb.go",
    "apps/v1": "k8s.io/api/apps/v1/generated.pb.go",
    "coordination/v1": "k8s.io/api/coordination/v1/generated.pb.go",
    "node/v1": "k8s.io/api/node/v1/generated.pb.go",
    "storage/v1": "k8s.io/api/storage/v1/generated.pb.go",
    "networking/v1": "k8s.io/api/networking/v1/generated.pb.go",
}


def check_against_gogo(model):
    """Compare the codec's "when is a field written" rule with gogo's generated Marshal code.

    The codec writes a pointer or []byte field when it is set, a slice or map when it is not
    empty, and every other field always. gogo expresses those as `if m.X != nil`,
    `if len(m.X) > 0` and no guard; any other shape would need a new rule.
    """
    for note in model.wire_notes:
        sys.stderr.write(f"note: {note}\n")
    problems = 0
    sources = {}
    for (pkg, name), fields in sorted(model.go_fields.items()):
        if pkg not in sources:
            with open(os.path.join(model.root, PB_FILES[pkg]), encoding="utf-8") as f:
                sources[pkg] = f.read()
        src = sources[pkg]
        start = src.find(f"func (m *{name}) MarshalToSizedBuffer(")
        if start < 0:
            sys.stderr.write(f"check: no Marshal for {pkg}.{name}\n")
            problems += 1
            continue
        body = src[start:src.find("\n}\n", start)]
        for go_name, ty, num in fields:
            if num == 0:
                continue
            if f"m.{go_name}" not in body:
                sys.stderr.write(f"check: {pkg}.{name}.{go_name} not marshalled\n")
                problems += 1
                continue
            if re.search(rf"if m\.{go_name} != nil \{{", body):
                guard = "set"
            elif re.search(rf"if len\(m\.{go_name}\) > 0 \{{", body):
                guard = "nonempty"
            else:
                guard = "always"
            if ty.startswith("Ty::Ptr") or ty == "Ty::Bytes":
                want = "set"
            elif ty.startswith(("Ty::Slice", "Ty::Map")):
                want = "nonempty"
            else:
                want = "always"
            if guard != want:
                sys.stderr.write(f"check: {pkg}.{name}.{go_name}: gogo {guard}, rule {want}\n")
                problems += 1
    sys.stderr.write(f"check: {len(model.go_fields)} structs, {problems} problems\n")
    return problems == 0


def main():
    args = sys.argv[1:]
    check = "--check" in args
    args = [a for a in args if a != "--check"]
    root = args[0] if args else DEFAULT_ROOT
    try:
        model = Model(root)
        text = model.render()
        if check:
            sys.exit(0 if check_against_gogo(model) else 1)
        sys.stdout.write(text)
    except GenError as e:
        sys.stderr.write(f"gen-schema: {e}\n")
        sys.exit(1)


if __name__ == "__main__":
    main()
