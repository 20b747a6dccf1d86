#!/usr/bin/env node
// Launch kinesis-local (kinesis-mock, what LocalStack runs) on 127.0.0.1 and an
// ephemeral port: the Kinesis emulator that serves enhanced fan-out
// (RegisterStreamConsumer, SubscribeToShard).
//
// kinesis-mock listens on every interface, on a TLS port and a plain HTTP port, both
// fixed by default. Here both listen on 127.0.0.1 and port 0; once both are up, each
// is asked for a plain HTTP response and the one that answers is printed as one JSON
// line on stdout:   {"port": 41234, "host": "127.0.0.1"}
// Its durations (stream creation, consumer registration, resharding) default to 50ms
// instead of 500ms unless set in the environment.
//
// The process exits when its stdin closes: the parent holds the write end of that
// pipe, so even a SIGKILLed parent (a killed test run) leaves no orphan behind.
'use strict'

var http = require('http')
var net = require('net')
var path = require('path')

var HOST = '127.0.0.1'
var DURATIONS = [
  'CREATE_STREAM_DURATION', 'DELETE_STREAM_DURATION', 'REGISTER_STREAM_CONSUMER_DURATION',
  'DEREGISTER_STREAM_CONSUMER_DURATION', 'MERGE_SHARDS_DURATION', 'SPLIT_SHARD_DURATION',
  'UPDATE_SHARD_COUNT_DURATION', 'START_STREAM_ENCRYPTION_DURATION',
  'STOP_STREAM_ENCRYPTION_DURATION', 'UPDATE_STREAM_MODE_DURATION',
]
DURATIONS.forEach(function(name) {
  if (!process.env[name]) process.env[name] = '50ms'
})
process.env.KINESIS_MOCK_PLAIN_PORT = '0'
process.env.KINESIS_MOCK_TLS_PORT = '0'
if (!process.env.SHARD_LIMIT) process.env.SHARD_LIMIT = '1000'
if (!process.env.LOG_LEVEL) process.env.LOG_LEVEL = 'WARN'

var ports = []
var listen = net.Server.prototype.listen
net.Server.prototype.listen = function() {
  var server = this
  var args = Array.prototype.slice.call(arguments)
  var callback = typeof args[args.length - 1] === 'function' ? args.pop() : undefined
  server.once('listening', function() {
    ports.push(server.address().port)
    if (ports.length === 2) reportPlainPort()
  })
  if (args.length && typeof args[0] === 'object' && args[0] !== null) {
    return listen.call(server, Object.assign({}, args[0], {host: HOST}), callback)
  }
  return listen.call(server, Number(args[0]) || 0, HOST, callback)
}

function reportPlainPort() {
  var pending = ports.length
  var found = false
  ports.forEach(function(port) {
    var request = http.request({host: HOST, port: port, method: 'GET', path: '/'}, function(res) {
      res.resume()
      if (!found) {
        found = true
        process.stdout.write(JSON.stringify({port: port, host: HOST}) + '\n')
      }
    })
    request.setTimeout(5000, function() { request.destroy() })
    request.on('error', function() {
      pending -= 1
      if (pending === 0 && !found) {
        process.stderr.write('kinesis_local_server: no port answered plain HTTP\n')
        process.exit(1)
      }
    })
    request.end()
  })
}

require('./exit_with_parent')

// kinesis-mock reads its certificate (server.json) relative to the working directory.
var main = require.resolve('kinesis-local/main.js')
process.chdir(path.dirname(main))
require(main)
