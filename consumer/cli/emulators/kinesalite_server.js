#!/usr/bin/env node
// Launch kinesalite (in-memory Kinesis) on 127.0.0.1 and an ephemeral port.
//
// kinesalite's own CLI binds every interface and a fixed default port, so we call
// its library directly. The chosen port is printed as one JSON line on stdout:
//   {"port": 41234, "host": "127.0.0.1"}
// Options (all optional): --port N (default 0), --createStreamMs, --deleteStreamMs,
// --updateStreamMs (default 50: tests should not wait half a second per stream) and
// --shardLimit (default 1000: kinesalite's default of 10 is a per-account quota that
// only gets in the way of local tests).
//
// The process exits when its stdin closes: the parent holds the write end of that
// pipe, so even a SIGKILLed parent (a killed test run) leaves no orphan behind.
'use strict'

var kinesalite = require('kinesalite')

// Parse --name=value and --name value (no dependency on a transitive package).
var argv = {}
for (var i = 2; i < process.argv.length; i++) {
  var m = /^--([^=]+)(?:=(.*))?$/.exec(process.argv[i])
  if (!m) continue
  argv[m[1]] = m[2] != null ? m[2] : process.argv[++i]
}

function num(name, dflt) {
  var v = argv[name]
  if (v == null) return dflt
  var n = Number(v)
  if (!Number.isFinite(n) || n < 0) {
    process.stderr.write('kinesalite_server: bad --' + name + ': ' + v + '\n')
    process.exit(2)
  }
  return n
}

var server = kinesalite({
  createStreamMs: num('createStreamMs', 50),
  deleteStreamMs: num('deleteStreamMs', 50),
  updateStreamMs: num('updateStreamMs', 50),
  shardLimit: num('shardLimit', 1000),
})

require('./exit_with_parent')

server.on('error', function(err) {
  process.stderr.write('kinesalite_server: ' + err.stack + '\n')
  process.exit(1)
})

server.listen(num('port', 0), '127.0.0.1', function() {
  var address = server.address()
  process.stdout.write(JSON.stringify({port: address.port, host: address.address}) + '\n')
})
