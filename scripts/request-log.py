#!/usr/bin/env python3
"""Summarizes the fake apiserver's request log (KUBEPLEX_SIM_REQUEST_LOG=FILE, see
crates/kubeplex-sim/src/server.rs `request_log`): LIST and WATCH requests by kind, split at a
time (default: none), e.g. the agents' sync in a `kubeplex-bench nodes` run.

    scripts/request-log.py FILE [--split SECONDS] [--who kubeplex|agents|all]
    scripts/request-log.py FILE --reviews

With --reviews: the SubjectAccessReviews instead (the log's REVIEW lines), by who sent them
(`pool`: kubeplex's own identity; `through pool`: a node tier's, impersonated by the pool),
whose access, verb and resource (node names as NODE), and how many asked a question (user and
attributes) the same sender had asked before.
"""
import argparse
import collections
import json
import re


def kind(uri):
    path, _, q = uri.partition('?')
    params = dict(p.partition('=')[::2] for p in q.split('&') if p)
    parts = path.strip('/').split('/')
    resource = parts[-1] if 'namespaces' not in parts[:-1] or len(parts) % 2 == 0 else parts[-2]
    if len(parts) >= 2 and parts[-2] == 'namespaces':
        resource = parts[-1]
    name = None
    # /api/v1/namespaces/NS/RES/NAME or /api/v1/RES/NAME
    core = parts[2:] if parts[0] == 'api' else parts[3:]
    if core and core[0] == 'namespaces' and len(core) >= 3:
        core = core[2:]
    if len(core) == 2:
        resource, name = core
    elif len(core) == 1:
        resource = core[0]
    if name or not core:
        # A get of one object, or discovery.
        return None
    watch = params.get('watch') in ('1', 'true')
    shape = []
    if watch:
        if params.get('sendInitialEvents') == 'true':
            shape.append('watchlist')
        elif params.get('timeoutSeconds') == '3':
            shape.append('probe-watch')
        else:
            shape.append('watch')
    else:
        if params.get('limit') == '1' and not params.get('resourceVersion'):
            shape.append('limit=1')
        elif params.get('resourceVersion') == '0':
            shape.append('list rv=0')
        elif params.get('resourceVersionMatch') == 'NotOlderThan':
            shape.append('list not-older-than')
        elif not params.get('resourceVersion'):
            shape.append('consistent list')
        else:
            shape.append('list rv')
    sel = params.get('fieldSelector', '')
    if 'metadata.name' in sel:
        shape.append('name=X')
    elif sel:
        shape.append('field=' + re.sub(r'node-\d+', 'NODE', sel))
    if params.get('labelSelector'):
        shape.append('label')
    return resource, ' '.join(shape)


def reviews(path):
    counts, repeats, seen = collections.Counter(), collections.Counter(), set()
    for line in open(path):
        f = line.split(' ', 2)
        if len(f) < 3 or f[1] != 'REVIEW':
            continue
        spec_text, _, caller = f[2].rpartition(' who=')
        try:
            spec = json.loads(spec_text)
        except ValueError:
            continue
        sender = 'through pool' if not re.search(r' as=- ', ' ' + caller) else 'pool'
        attrs = spec.get('resourceAttributes') or spec.get('nonResourceAttributes') or {}
        user = re.sub(r'node-\d+', 'NODE', spec.get('user', ''))
        what = attrs.get('resource') or attrs.get('path', '')
        named = 'named' if attrs.get('name') else ''
        key = (sender, user, attrs.get('verb', ''), what, named)
        counts[key] += 1
        question = (sender, json.dumps(spec, sort_keys=True))
        if question in seen:
            repeats[key] += 1
        seen.add(question)
    for key, n in counts.most_common():
        sender, user, verb, what, named = key
        print(f'{n:6} {repeats[key]:6} repeated  {sender:12} {user:48} {verb:12} {what} {named}')
    print(f'{sum(counts.values()):6} {sum(repeats.values()):6} repeated  SubjectAccessReviews')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('file')
    ap.add_argument('--split', type=float, default=None)
    ap.add_argument('--who', default='all')
    ap.add_argument('--reviews', action='store_true')
    args = ap.parse_args()
    if args.reviews:
        reviews(args.file)
        return
    counts = collections.Counter()
    for line in open(args.file):
        f = line.split()
        if len(f) < 6 or f[1] != 'GET':
            continue
        t, uri, as_, ua = float(f[0]), f[2], f[4], f[5]
        by_kubeplex = ua.startswith('ua=kubeplex')
        if args.who == 'kubeplex' and not by_kubeplex or args.who == 'agents' and by_kubeplex:
            continue
        k = kind(uri)
        if not k:
            continue
        phase = '' if args.split is None else ('before' if t < args.split else 'after')
        who = 'impersonating' if as_ != 'as=-' else 'own'
        counts[(phase, k[0], k[1], who)] += 1
    total = collections.Counter()
    for (phase, res, shape, who), n in sorted(counts.items()):
        total[phase] += n
        print(f'{phase:7} {n:5}  {res:16} {shape:28} {who}')
    for phase, n in total.items():
        print(f'{phase or "all":7} {n:5}  LIST+WATCH')


main()
