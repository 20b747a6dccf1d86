// Shared by the emulator launchers: exit at once on SIGTERM/SIGINT, and when stdin
// closes. The parent holds the write end of that pipe, so even a SIGKILLed parent (a
// killed test run) leaves no orphan behind. Exiting at once is safe: the emulators'
// stores are in memory, and server.close() would wait for idle keep-alive connections.
'use strict'

function shutdown() {
  process.exit(0)
}

process.on('SIGTERM', shutdown)
process.on('SIGINT', shutdown)
process.stdin.on('end', shutdown)
process.stdin.on('close', shutdown)
process.stdin.on('error', shutdown)
process.stdin.resume()
