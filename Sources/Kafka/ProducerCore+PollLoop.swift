// The producer's poll thread: serves delivery reports and flushes until the producer closes, then
// purges what is left so every delivery callback runs exactly once.

extension ProducerCore {
    /// Runs on the producer's own thread until the producer closes.
    static func pollLoop(client: RDKafkaClient, core: ProducerCore) {
        while true {
            client.poll(milliseconds: 100)
            core.checkWaiting()
            let (flushes, closing) = core.state.withLock { state in
                defer { state.flushRequests = [] }
                return (state.flushRequests, state.lifecycle != .running)
            }
            for request in flushes {
                // The flush serves delivery reports on this thread while it waits.
                let response = client.flush(milliseconds: Int32(clamping: request.timeout.wholeMilliseconds))
                if response.isSuccess {
                    request.continuation.resume(returning: nil)
                } else {
                    request.continuation.resume(
                        returning: KafkaError(
                            code: .timeout,
                            message:
                                "flush: \(client.outQueueLength) records still undelivered after \(request.timeout)",
                            librdkafkaCode: response.rawValue, librdkafkaName: response.name
                        ))
                }
            }
            if closing { break }
        }
        // No new sends start now; let those inside the produce call finish, then fail whatever is left so
        // every delivery callback runs exactly once.
        while core.activeEnqueues.load(ordering: .sequentiallyConsistent) > 0 { client.poll(milliseconds: 1) }
        let deadline = ContinuousClock.now.advanced(by: .seconds(5))
        repeat {
            client.purgeQueuedAndInFlight()
            client.poll(milliseconds: 50)
        } while client.outQueueLength > 0 && ContinuousClock.now < deadline
        let waiters = core.state.withLock { state in
            state.lifecycle = .closed
            defer { state.closeWaiters = [] }
            return state.closeWaiters
        }
        for waiter in waiters { waiter.resume() }
    }
}
