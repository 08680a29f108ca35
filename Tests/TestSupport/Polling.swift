// The one way tests wait: for a condition that an event makes true, never for a stretch of time.
// The timeout only bounds how long a broken build takes to fail, so the default is generous: the
// parallel suite runs on 2 cores, and a condition that waits for a task of the cooperative pool (2
// threads here) can take seconds to come true while other tests hold both threads (CI once waited
// over 5 s for a task to start). A passing wait returns as soon as its condition holds.

import Glibc

/// Waits until `condition` holds, polling every 10 ms, for at most `timeout`; returns whether it held.
/// Wrap it in `#expect` so a timeout fails the test where it happened. A condition that throws ends
/// the wait with its error.
@discardableResult
package func eventually(timeout: Duration = .seconds(30), _ condition: () throws -> Bool) async rethrows -> Bool {
    let clock = ContinuousClock()
    let end = clock.now + timeout
    while clock.now < end {
        if try condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return try condition()
}

/// `eventually` for synchronous tests: blocks the calling thread while it polls every millisecond.
@discardableResult
package func eventuallyBlocking(timeout: Duration = .seconds(30), _ condition: () -> Bool) -> Bool {
    let clock = ContinuousClock()
    let end = clock.now + timeout
    while clock.now < end {
        if condition() { return true }
        usleep(1000)
    }
    return condition()
}

/// `eventually` for a condition that must itself wait (a query to a broker, say), checked every
/// `interval` so that a slow check is not repeated back to back.
@discardableResult
package func eventually(timeout: Duration, every interval: Duration, _ condition: () async -> Bool) async -> Bool {
    let clock = ContinuousClock()
    let end = clock.now + timeout
    while clock.now < end {
        if await condition() { return true }
        try? await Task.sleep(for: interval)
    }
    return await condition()
}
