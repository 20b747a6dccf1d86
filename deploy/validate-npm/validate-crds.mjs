// Validate custom resources against the schemas of their CRDs, as compiled into the
// @kubernetes-models packages (ajv validators): Prometheus Operator resources
// (ServiceMonitor, PrometheusRule...; generated from the operator's CRD OpenAPI schemas)
// and KEDA's (ScaledObject, TriggerAuthentication; generated from KEDA's Go API types,
// so a trigger's metadata values must be strings, replica counts integers).
//
// Input on stdin: a JSON array of {"source": "...", "doc": {...}}. One line per resource
// on stdout; exit 1 if any failed or has no known schema. Used by deploy/validate.py.
import { readFileSync } from "node:fs";

const GROUPS = {
  "monitoring.coreos.com": "@kubernetes-models/prometheus-operator",
  "keda.sh": "@kubernetes-models/keda",
};

const items = JSON.parse(readFileSync(0, "utf8"));
let failed = 0;
for (const { source, doc } of items) {
  const [group, version] = String(doc.apiVersion).split("/");
  const name = `${doc.kind}/${doc.metadata?.name ?? "?"}`;
  const pkg = GROUPS[group];
  if (!pkg || !version) {
    console.log(`FAIL ${source}: ${name}: no schema for apiVersion ${doc.apiVersion}`);
    failed++;
    continue;
  }
  let Model;
  try {
    Model = (await import(`${pkg}/${group}/${version}/${doc.kind}`))[doc.kind];
  } catch (error) {
    console.log(`FAIL ${source}: ${name}: no schema for ${doc.apiVersion} ${doc.kind}`);
    failed++;
    continue;
  }
  try {
    new Model(doc).validate();
    console.log(`ok   ${source}: ${name} (${doc.apiVersion})`);
  } catch (error) {
    console.log(`FAIL ${source}: ${name}: ${error.message}`);
    failed++;
  }
}
process.exit(failed ? 1 : 0);
