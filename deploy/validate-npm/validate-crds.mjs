// Validate custom resources against the schemas of their CRDs, as compiled into the
// @kubernetes-models packages (ajv validators): Prometheus Operator resources
// (ServiceMonitor, PrometheusRule...; generated from the operator's CRD OpenAPI schemas)
// and KEDA's (ScaledObject, TriggerAuthentication; generated from KEDA's Go API types,
// so a trigger's metadata values must be strings, replica counts integers).
//
// Strict, like the core resources' check: the compiled schemas accept fields they do not
// know, so each resource is validated through a proxy that records the fields the
// validator reads, and a field it never read (a typo such as `maxReplicas`) fails.
//
// Input on stdin: a JSON array of {"source": "...", "doc": {...}}. One line per resource
// on stdout; exit 1 if any failed or has no known schema. Used by deploy/validate.py.
import { readFileSync } from "node:fs";

const GROUPS = {
  "monitoring.coreos.com": "@kubernetes-models/prometheus-operator",
  "keda.sh": "@kubernetes-models/keda",
};

// A copy of `value` whose objects record each property read into `reads` (path -> keys).
function tracked(value, path, reads) {
  if (Array.isArray(value)) {
    return value.map((item, index) => tracked(item, `${path}/${index}`, reads));
  }
  if (value === null || typeof value !== "object") {
    return value;
  }
  const read = new Set();
  reads.push({ path, keys: Object.keys(value), read });
  const copy = {};
  for (const [key, item] of Object.entries(value)) {
    copy[key] = tracked(item, `${path}/${key}`, reads);
  }
  return new Proxy(copy, {
    get(target, key, receiver) {
      if (typeof key === "string") read.add(key);
      return Reflect.get(target, key, receiver);
    },
  });
}

// The fields of `doc` that the model's validator never read: unknown to the schema.
function unknownFields(Model, doc) {
  const reads = [];
  Model.prototype.validate.call(tracked(doc, "", reads));
  return reads.flatMap(({ path, keys, read }) =>
    keys.filter((key) => !read.has(key)).map((key) => `${path}/${key}`),
  );
}

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
  } catch (error) {
    console.log(`FAIL ${source}: ${name}: ${error.message}`);
    failed++;
    continue;
  }
  const unknown = unknownFields(Model, doc);
  if (unknown.length) {
    console.log(`FAIL ${source}: ${name}: unknown fields ${unknown.join(", ")}`);
    failed++;
    continue;
  }
  console.log(`ok   ${source}: ${name} (${doc.apiVersion})`);
}
process.exit(failed ? 1 : 0);
