#!/usr/bin/env bash
# Checks the deployment files without a cluster: YAML/JSON syntax, that every kustomize
# overlay renders (kubectl kustomize), the rendered objects' invariants (GPU overlay has
# --backend cuda and nvidia.com/gpu; restricted security context; drain timing; HPA
# metric), that every crossreg_* metric the HPA, the adapter, the Prometheus rules and the
# Grafana dashboard use is one the server exports, and the Prometheus rules (promtool).
# Installs what is missing (Debian 12 packages): kubernetes-client (kubectl; skipped when
# any kubectl is on PATH), prometheus (promtool), python3-yaml.
# Prints one line per check, then 'check_deploy: N passed, M failed'; exits 1 on any failure.
#   scripts/check_deploy.sh
set -uo pipefail
cd "$(dirname "$0")/.."

log() { echo "[check_deploy] $*"; }

# ---- tools -----------------------------------------------------------------------------
need=()
command -v kubectl >/dev/null 2>&1 || need+=(kubernetes-client)
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
python3 -c 'import yaml' >/dev/null 2>&1 || need+=(python3-yaml)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  log "installing Debian packages: ${need[*]}"
  # The prometheus package would start a Prometheus server on :9090 (the crossreg
  # server's default metrics port); only promtool is wanted, so keep services stopped.
  policy_added=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
    $SUDO chmod 755 /usr/sbin/policy-rc.d
    policy_added=1
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  rc=$?
  [ $policy_added = 1 ] && $SUDO rm -f /usr/sbin/policy-rc.d
  if [ $rc -ne 0 ]; then
    log "FAIL: apt-get install ${need[*]} (exit $rc)"
    exit 1
  fi
fi
log "kubectl: $(kubectl version --client 2>/dev/null | head -2 | tr '\n' ' ')"
log "promtool: $(promtool --version 2>&1 | head -1)"

passed=0
failed=0
ok()   { echo "ok   $*"; passed=$((passed + 1)); }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# ---- YAML and JSON syntax --------------------------------------------------------------
while IFS= read -r f; do
  if err=$(python3 -c 'import sys, yaml; list(yaml.safe_load_all(open(sys.argv[1])))' "$f" 2>&1); then
    ok "yaml syntax: $f"
  else
    fail "yaml syntax: $f: $(echo "$err" | tail -1)"
  fi
done < <(find deploy -name '*.yaml' -o -name '*.yml' | sort)
for f in deploy/grafana/*.json; do
  if err=$(python3 -c 'import sys, json; json.load(open(sys.argv[1]))' "$f" 2>&1); then
    ok "json syntax: $f"
  else
    fail "json syntax: $f: $(echo "$err" | tail -1)"
  fi
done

# ---- kustomize renders -----------------------------------------------------------------
# Every directory with a kustomization.yaml except the base (rendered through the overlays).
targets=()
for d in deploy/kubernetes/overlays/*/ deploy/kubernetes/monitoring/ deploy/kubernetes/examples/*/; do
  [ -f "$d/kustomization.yaml" ] && targets+=("${d%/}")
done
rendered=()
for d in "${targets[@]}"; do
  out="$WORK/$(echo "$d" | tr '/' '_').yaml"
  # Current kubectl warns on stderr about the kustomize v2 field names (kept so that
  # Debian 12's kubectl 1.20 renders the same files); show stderr only on failure.
  if kubectl kustomize "$d" >"$out" 2>"$WORK/err"; then
    if [ -s "$out" ]; then
      ok "kubectl kustomize $d ($(grep -c '^kind:' "$out") objects)"
      rendered+=("$d=$out")
    else
      fail "kubectl kustomize $d: empty output"
    fi
  else
    fail "kubectl kustomize $d: $(grep -v '^# Warning' "$WORK/err" | head -3 | tr '\n' ' ' | cut -c1-400)"
  fi
done

# ---- rendered objects, adapter rule, metric names ----------------------------------------
python3 - "${rendered[@]}" >"$WORK/py.out" 2>&1 <<'PY'
import json, re, sys, yaml

lines = []
def check(name, cond, detail=""):
    lines.append(("ok   " if cond else "FAIL ") + name + ("" if cond or not detail else ": " + detail))

renders = dict(arg.split("=", 1) for arg in sys.argv[1:])
def objects(path):
    return [d for d in yaml.safe_load_all(open(path)) if d]
def one(objs, kind, name=None):
    found = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    return found[0] if found else None

def flag_value(args, flag):
    """Value of --flag=v or --flag v (dashes or underscores), else None."""
    names = {flag, flag.replace("_", "-")}
    for i, a in enumerate(args):
        key, eq, val = a.partition("=")
        if key.lstrip("-") in names and a.startswith("--"):
            if eq:
                return val
            return args[i + 1] if i + 1 < len(args) else ""
    return None

hpa_metric = None
for target, path in sorted(renders.items()):
    if "/overlays/" not in target and "/examples/" not in target:
        continue
    objs = objects(path)
    label = target.replace("deploy/kubernetes/", "")
    dep = one(objs, "Deployment", "crossreg")
    if dep is None:
        check(f"{label}: has Deployment crossreg", False, "missing")
        continue
    pod = dep["spec"]["template"]["spec"]
    c = next(c for c in pod["containers"] if c["name"] == "crossreg")
    args = c.get("args", [])
    res = c.get("resources", {})
    gpu_limit = str(res.get("limits", {}).get("nvidia.com/gpu", ""))
    gpu_request = str(res.get("requests", {}).get("nvidia.com/gpu", ""))
    backend = flag_value(args, "backend")

    if label == "overlays/gpu":
        check(f"{label}: args pass --backend cuda", backend == "cuda", f"args {args}")
        check(f"{label}: requests and limits nvidia.com/gpu: 1",
              gpu_limit == "1" and gpu_request == "1", f"resources {res}")
        check(f"{label}: GPU nodeSelector and toleration",
              bool(pod.get("nodeSelector")) and any("nvidia.com/gpu" in t.get("key", "") for t in pod.get("tolerations", [])))
    else:
        check(f"{label}: no GPU, backend not cuda", not gpu_limit and backend in (None, "cpu", "auto"),
              f"backend {backend}, nvidia.com/gpu {gpu_limit}")

    psc, csc = pod.get("securityContext", {}), c.get("securityContext", {})
    sec_ok = (psc.get("runAsNonRoot") is True and psc.get("runAsUser") == 10001
              and csc.get("allowPrivilegeEscalation") is False and csc.get("readOnlyRootFilesystem") is True
              and csc.get("capabilities", {}).get("drop") == ["ALL"]
              and (csc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type") == "RuntimeDefault"
              and pod.get("automountServiceAccountToken") is False)
    tmp_ok = any(m["mountPath"] == "/tmp" for m in c.get("volumeMounts", [])) and any(
        "emptyDir" in v for v in pod.get("volumes", []) if v["name"] in
        [m["name"] for m in c.get("volumeMounts", []) if m["mountPath"] == "/tmp"])
    check(f"{label}: restricted securityContext, emptyDir /tmp", sec_ok and tmp_ok, f"pod {psc}, container {csc}")

    # gRPC probes on 50051; with TLS on that port (the kubelet's gRPC probes cannot speak
    # TLS) HTTP probes on the metrics port: /ready for startup and readiness, /health for
    # liveness.
    tls = flag_value(args, "tls_cert_file") not in (None, "")
    if tls:
        want = {"startupProbe": "/ready", "readinessProbe": "/ready", "livenessProbe": "/health"}
        probes_ok = all(c.get(p, {}).get("httpGet", {}).get("path") == path
                        and c.get(p, {}).get("httpGet", {}).get("port") in ("metrics", 9090)
                        for p, path in want.items())
        check(f"{label}: TLS on 50051, so HTTP probes /ready and /health on the metrics port", probes_ok)
    else:
        probes_ok = all(c.get(p, {}).get("grpc", {}).get("port") == 50051
                        for p in ("startupProbe", "readinessProbe", "livenessProbe"))
        check(f"{label}: grpc startup/readiness/liveness probes on 50051", probes_ok)

    check(f"{label}: no --threads (follows the CPU limit)", flag_value(args, "threads") is None, f"args {args}")

    drain = flag_value(args, "drain_timeout_s")
    drain = float(drain) if drain not in (None, "") else 30.0  # the server's default
    cmd = c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
    sleep = c.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds")
    if sleep is None and len(cmd) == 2 and cmd[0].endswith("sleep"):
        sleep = float(cmd[1])
    grace = pod.get("terminationGracePeriodSeconds", 30)
    # After SIGTERM the server drains for --drain_timeout_s, then allows 5 s for the last writes.
    need = (sleep or 0) + drain + 5
    check(f"{label}: grace {grace}s > preStop {sleep}s + drain {drain:g}s + 5s",
          sleep is not None and grace > need, "no preStop sleep" if sleep is None else f"needs more than {need:g}")

    check(f"{label}: no Deployment replicas (the HPA owns them)", "replicas" not in dep["spec"])

    headless = one(objs, "Service", "crossreg-headless")
    check(f"{label}: headless Service crossreg-headless", headless is not None and headless["spec"].get("clusterIP") == "None")
    check(f"{label}: ClusterIP Service crossreg", one(objs, "Service", "crossreg") is not None)
    pdb = one(objs, "PodDisruptionBudget")
    check(f"{label}: PodDisruptionBudget policy/v1", pdb is not None and pdb["apiVersion"] == "policy/v1")
    hpa = one(objs, "HorizontalPodAutoscaler")
    pods_metrics = [m["pods"]["metric"]["name"] for m in (hpa or {}).get("spec", {}).get("metrics", []) if m["type"] == "Pods"]
    cpu = [m for m in (hpa or {}).get("spec", {}).get("metrics", []) if m["type"] == "Resource" and m["resource"]["name"] == "cpu"]
    check(f"{label}: HPA autoscaling/v2 on crossreg_num_requests_waiting + cpu",
          hpa is not None and hpa["apiVersion"] == "autoscaling/v2" and pods_metrics == ["crossreg_num_requests_waiting"]
          and bool(cpu) and hpa["spec"].get("behavior", {}).get("scaleDown", {}).get("stabilizationWindowSeconds", 0) > 0,
          f"pods metrics {pods_metrics}")
    hpa_metric = hpa_metric or (pods_metrics[0] if pods_metrics else None)

mon = [p for t, p in renders.items() if t.endswith("/monitoring")]
if mon:
    pm = one(objects(mon[0]), "PodMonitor")
    check("monitoring: PodMonitor scrapes port 'metrics'",
          pm is not None and any(e.get("port") == "metrics" for e in pm["spec"]["podMetricsEndpoints"]))

# prometheus-adapter: the rule must serve the metric the HPA asks for.
values = yaml.safe_load(open("deploy/prometheus-adapter/values.yaml"))
served = []
for r in values.get("rules", {}).get("custom", []):
    m = re.match(r"^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)", r.get("seriesQuery", ""))
    served.append(r.get("name", {}).get("as") or (m.group(1) if m else None))
check(f"prometheus-adapter: serves the HPA's metric {hpa_metric}", hpa_metric in served, f"serves {served}")

# Metric names: every crossreg_* series the deployment uses must be one the server exports.
src = open("server/prometheus_metrics.cc").read()
exported = set(re.findall(r'\.Name\("(crossreg_[a-z0-9_]+)"\)', src))
def base_name(n):  # histogram series -> the histogram's name
    b = re.sub(r"_(bucket|sum|count)$", "", n)
    return b if b in exported else n
uses = {
    "deploy/prometheus-adapter/values.yaml": open("deploy/prometheus-adapter/values.yaml").read(),
    "deploy/kubernetes (HPA)": hpa_metric or "",
}
for f in ["deploy/prometheus/crossreg-rules.yaml", "deploy/grafana/crossreg-dashboard.json"]:
    uses[f] = open(f).read()
for f, text in uses.items():
    names = sorted({base_name(n) for n in re.findall(r"\bcrossreg_[a-z0-9_]+", text)})
    unknown = [n for n in names if n not in exported]
    check(f"metric names in {f} are exported by the server ({len(names)} used)", not unknown and bool(exported),
          "not exported: " + ", ".join(unknown) + "; similar names the server exports: "
          + (", ".join(sorted(n for n in exported if any(n.startswith(u) for u in unknown))) or "none"))

# docs/deploy.md wraps the plain rule file into a PrometheusRule; the wrapped form must parse.
rules_text = open("deploy/prometheus/crossreg-rules.yaml").read()
wrapped = ("apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata:\n  name: crossreg\n"
           "  namespace: crossreg\nspec:\n" + "".join("  " + l if l.strip() else l for l in rules_text.splitlines(True)))
try:
    pr = yaml.safe_load(wrapped)
    check("PrometheusRule wrapping of deploy/prometheus/crossreg-rules.yaml parses",
          bool(pr["spec"]["groups"]) and pr["spec"]["groups"] == yaml.safe_load(rules_text)["groups"])
except Exception as e:  # noqa: BLE001
    check("PrometheusRule wrapping of deploy/prometheus/crossreg-rules.yaml parses", False, str(e))

for l in lines:
    print(l)
PY
py_rc=$?
while IFS= read -r line; do
  case "$line" in
    "ok   "*) ok "${line#ok   }" ;;
    "FAIL "*) fail "${line#FAIL }" ;;
    *) echo "$line" ;;
  esac
done <"$WORK/py.out"
[ $py_rc -ne 0 ] && fail "object checks (python exited $py_rc)"

# ---- Prometheus rules ------------------------------------------------------------------
for f in deploy/prometheus/*.yaml; do
  if promtool check rules "$f" >"$WORK/promtool" 2>&1; then
    ok "promtool check rules $f ($(grep -o '[0-9]* rules found' "$WORK/promtool"))"
  else
    fail "promtool check rules $f: $(grep -v '^Checking' "$WORK/promtool" | head -5 | tr '\n' ' ')"
  fi
done

echo "check_deploy: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
