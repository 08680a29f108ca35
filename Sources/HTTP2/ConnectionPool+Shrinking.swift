// Shrinking: a pool that grew for a backlog gives the connections back once its streams have fitted in fewer
// for a while (`Configuration.shrinkAfter`), one at a time, so that its size follows the load both ways.

import Platform

extension ConnectionPool {
    /// How often a grown pool looks at its load: a quarter of `shrinkAfter`, at least 10 ms.
    var shrinkCheckInterval: UInt64 { max(10_000_000, shrinkAfterNanoseconds / 4) }

    func scheduleShrinkCheck() {
        group.loops[0].schedule(at: MonotonicClock.now() &+ shrinkCheckInterval) { [self] in shrinkIfUnderused() }
    }

    /// Retires one grown connection when the pool's streams in flight have been at most half of what one
    /// connection fewer carries, with nothing waiting, at every check for `shrinkAfter`. The least loaded
    /// ready connection goes: it takes no new streams and closes when its own have ended. Checks again while
    /// the pool is still grown.
    func shrinkIfUnderused() {
        let now = MonotonicClock.now()
        var retiring: HTTP2Connection?
        let checkAgain = state.withLock { state -> Bool in
            guard !state.isShutDown, state.targetConnections > configuration.connectionCount else {
                state.shrinkCheckScheduled = false
                return false
            }
            var ready = 0
            var limits = 0
            var inFlight = 0
            var leastLoaded: Int?
            var leastLoad = Int.max
            for index in state.entries.indices where state.entries[index].isReady {
                let entry = state.entries[index]
                ready += 1
                limits += entry.limit
                inFlight += entry.inFlight
                if entry.inFlight < leastLoad {
                    leastLoaded = index
                    leastLoad = entry.inFlight
                }
            }
            let fitsInOneFewer = ready >= 2 && 2 * inFlight <= (ready - 1) * (limits / ready)
            guard fitsInOneFewer, state.waiters.isEmpty else {
                state.underusedSince = now
                return true
            }
            if now &- state.underusedSince >= shrinkAfterNanoseconds, let leastLoaded {
                retiring = state.moveToDraining(leastLoaded, shrunk: true)
                state.targetConnections -= 1
                state.underusedSince = now
            }
            return true
        }
        if let retiring {
            retiring.loop.execute {
                retiring.retireOnRequest("the pool shrinks: its streams fit in fewer connections")
            }
        }
        if checkAgain { scheduleShrinkCheck() }
    }
}
