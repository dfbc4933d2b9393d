// Preloaded into the web app (`node --require`): when the process that started it with an IPC
// channel (the launcher) goes away, even killed with -9, the channel closes and the app shuts
// down as on SIGTERM (the server finishes the requests in flight, then exits). Without a channel
// (tests, benchmarks, a bare `next start`) this does nothing.
if (process.send) {
  process.on("disconnect", () => process.kill(process.pid, "SIGTERM"));
}
