#!/usr/bin/env node
// Launch dynalite (an in-memory DynamoDB) on 127.0.0.1 and an ephemeral port, for the
// tests that meet what it does differently from moto (tests/support/dynalite.py). The
// chosen port is printed as one JSON line on stdout: {"port": 41234}. Table changes
// take no time. Exits when its stdin closes (see exit_with_parent.js).
'use strict'

var dynalite = require('dynalite')

var server = dynalite({createTableMs: 0, updateTableMs: 0, deleteTableMs: 0})

require('../../consumer/cli/emulators/exit_with_parent')

server.on('error', function(err) {
  process.stderr.write('dynalite_server: ' + err.stack + '\n')
  process.exit(1)
})

server.listen(0, '127.0.0.1', function() {
  process.stdout.write(JSON.stringify({port: server.address().port}) + '\n')
})
