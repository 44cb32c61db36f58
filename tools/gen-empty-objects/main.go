// Generates crates/kubeplex-wire/src/proto/empty_objects.rs: for every built-in kind with ObjectMeta,
// the bytes the apiserver writes after `metadata` when it encodes an empty object of that kind
// (which is what a watch BOOKMARK object is), in JSON and in protobuf.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

type entry struct {
	apiVersion, kind string
	jsonTail         string
	protoTail        []byte
}

func rustBytes(b []byte) string {
	var sb strings.Builder
	sb.WriteString("b\"")
	for _, c := range b {
		fmt.Fprintf(&sb, "\\x%02x", c)
	}
	sb.WriteString("\"")
	return sb.String()
}

func rustStr(s string) string {
	var sb strings.Builder
	sb.WriteString("\"")
	for _, r := range s {
		switch r {
		case '"':
			sb.WriteString("\\\"")
		case '\\':
			sb.WriteString("\\\\")
		default:
			sb.WriteRune(r)
		}
	}
	sb.WriteString("\"")
	return sb.String()
}

func main() {
	var entries []entry
	for gvk, t := range scheme.Scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal || strings.HasSuffix(gvk.Kind, "List") {
			continue
		}
		obj, ok := reflect.New(t).Interface().(runtime.Object)
		if !ok {
			continue
		}
		m, ok := obj.(metav1.Object)
		if !ok {
			continue
		}
		m.SetResourceVersion("1")
		obj.GetObjectKind().SetGroupVersionKind(gvk)
		js, err := json.Marshal(obj)
		if err != nil {
			panic(err)
		}
		apiVersion := gvk.GroupVersion().String()
		prefix := fmt.Sprintf(`{"kind":%q,"apiVersion":%q,"metadata":{"resourceVersion":"1"}`, gvk.Kind, apiVersion)
		if !bytes.HasPrefix(js, []byte(prefix)) || js[len(js)-1] != '}' {
			fmt.Fprintf(os.Stderr, "skip %v: json %s\n", gvk, js)
			continue
		}
		jsonTail := string(js[len(prefix) : len(js)-1])
		pm, ok := obj.(interface{ Marshal() ([]byte, error) })
		if !ok {
			fmt.Fprintf(os.Stderr, "skip %v: no protobuf\n", gvk)
			continue
		}
		pb, err := pm.Marshal()
		if err != nil {
			panic(err)
		}
		metaField := []byte("\x0a\x11\x0a\x00\x12\x00\x1a\x00\x22\x00\x2a\x00\x32\x01\x31\x38\x00\x42\x00")
		if !bytes.HasPrefix(pb, metaField) {
			fmt.Fprintf(os.Stderr, "skip %v: proto %x\n", gvk, pb)
			continue
		}
		entries = append(entries, entry{apiVersion, gvk.Kind, jsonTail, pb[len(metaField):]})
	}
	sort.Slice(entries, func(i, j int) bool {
		if entries[i].apiVersion != entries[j].apiVersion {
			return entries[i].apiVersion < entries[j].apiVersion
		}
		return entries[i].kind < entries[j].kind
	})
	fmt.Println("//! @generated from k8s.io/api v0.36.4 (client-go's scheme) by a small Go program; do not edit.")
	fmt.Println("//!")
	fmt.Println("//! For each built-in kind with ObjectMeta: an object of that kind with only")
	fmt.Println("//! `metadata.resourceVersion` set (what a watch BOOKMARK carries) was marshalled with")
	fmt.Println("//! encoding/json and with its gogo Marshal(); the bytes after the metadata are kept.")
	fmt.Println("")
	fmt.Println("/// (apiVersion, kind, JSON members after `\"metadata\":{...}` before the final `}`,")
	fmt.Println("/// protobuf fields after ObjectMeta), sorted by (apiVersion, kind).")
	fmt.Println("#[rustfmt::skip]")
	fmt.Println("pub(super) static EMPTY_OBJECTS: &[(&str, &str, &str, &[u8])] = &[")
	for _, e := range entries {
		fmt.Printf("    (%s, %s, %s, %s),\n", rustStr(e.apiVersion), rustStr(e.kind), rustStr(e.jsonTail), rustBytes(e.protoTail))
	}
	fmt.Println("];")
}
