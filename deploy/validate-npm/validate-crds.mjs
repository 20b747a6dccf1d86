// Validate Prometheus Operator resources (ServiceMonitor, PodMonitor, PrometheusRule...)
// against the schemas of the CRDs, as compiled into @kubernetes-models/prometheus-operator
// (generated from the operator's CRD OpenAPI schemas; ajv validators).
//
// Input on stdin: a JSON array of {"source": "...", "doc": {...}}. One line per resource
// on stdout; exit 1 if any failed or has no known schema. Used by deploy/validate.py.
import { readFileSync } from "node:fs";

const GROUPS = {
  "monitoring.coreos.com": "@kubernetes-models/prometheus-operator",
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
