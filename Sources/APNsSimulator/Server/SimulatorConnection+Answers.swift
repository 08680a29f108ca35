// A complete request is planned by the engine, then answered at once or when its delay timer fires;
// response bodies are handed to nghttp2 as it asks for them.

import CNghttp2
import Platform

extension SimulatorConnection {
    func fireDueTimers() {
        let now = MonotonicClock.now()
        while let due = timers.popDue(now: now) {
            guard let stream = streams[due.streamID] else { continue }  // reset by the client meanwhile
            submit(due.response, on: stream)
        }
    }

    func handleComplete(_ stream: StreamState) {
        if let last = goAwayLastStreamID, stream.id > last { return }  // unprocessed after our GOAWAY
        guard let session else { return }
        let plan = engine.plan(stream.request, streamID: stream.id, context: &context)
        // The answer is decided; a delayed one waits up to the latency with thousands of others, and
        // the request's headers and body are no longer needed while it does.
        stream.request.discardContent()
        if let maximum = plan.newMaxConcurrentStreams, maximum != announcedMaxConcurrentStreams {
            announce(maxConcurrentStreams: maximum, session: session)
        }
        if plan.dropConnection {
            closeNow = true
            abrupt = true
            return
        }
        if plan.goAway == .beforeThisStream {
            submitGoAway(lastStreamID: highestPlannedStreamID)
            return
        }
        highestPlannedStreamID = max(highestPlannedStreamID, stream.id)
        if case .respond(let response) = plan.answer {
            if plan.delayNanoseconds == 0 {
                submit(response, on: stream)
            } else {
                timers.push(
                    deadline: Self.answerDeadline(now: MonotonicClock.now(), delay: plan.delayNanoseconds),
                    (streamID: stream.id, response: response))
            }
        }
        if plan.goAway == .includingThisStream { submitGoAway(lastStreamID: stream.id) }
    }

    static let contentType: [UInt8] = Array("application/json".utf8)

    /// When a delayed answer goes out. From 64 ms up, the due time is rounded up to a grid of a 64th of
    /// the delay, so that the answers falling in one grid step leave in one wake-up and one write; each
    /// answer is then at most a 64th of its delay late. Exact to the millisecond, each connection's
    /// thread woke up to once a millisecond while answers waited, on the cores the client under test
    /// shares in `bench pipeline` (docs/performance.md). Shorter delays stay exact (poll's millisecond
    /// is already their grid).
    static func answerDeadline(now: UInt64, delay: UInt64) -> UInt64 {
        let due = now &+ delay
        guard delay >= 64_000_000 else { return due }
        let step = delay / 64
        return (due / step &+ 1) &* step
    }

    func submit(_ response: SimulatorResponse, on stream: StreamState) {
        guard let session else { return }
        stream.responseBody = response.body
        var fields: [(String, String)] = [
            (":status", String(response.status)), (response.idHeaderName, response.apnsID),
        ]
        for field in response.extraHeaders { fields.append((field.name, field.value)) }
        if let uniqueID = response.uniqueID { fields.append(("apns-unique-id", uniqueID)) }
        if let retryAfter = response.retryAfterSeconds { fields.append(("retry-after", String(retryAfter))) }
        if !stream.responseBody.isEmpty {
            fields.append(("content-type", "application/json"))
            fields.append(("content-length", String(stream.responseBody.count)))
        }
        HeaderBlock.withNameValues(fields) { nva, count in
            if stream.responseBody.isEmpty {
                _ = nghttp2_submit_response(session, stream.id, nva, count, nil)
            } else {
                var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil)) {
                    _, streamID, buffer, length, flags, _, user in
                    SimulatorConnection.from(user).readResponseBody(streamID, buffer!, length, flags!)
                }
                _ = nghttp2_submit_response(session, stream.id, nva, count, &provider)
            }
        }
    }

    func readResponseBody(
        _ streamID: Int32, _ buffer: UnsafeMutablePointer<UInt8>, _ length: Int, _ flags: UnsafeMutablePointer<UInt32>
    ) -> Int {
        guard let stream = streams[streamID] else {
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            return 0
        }
        let count = min(length, stream.responseBody.count - stream.responseOffset)
        stream.responseBody.withUnsafeBufferPointer {
            buffer.update(from: $0.baseAddress! + stream.responseOffset, count: count)
        }
        stream.responseOffset += count
        if stream.responseOffset >= stream.responseBody.count { flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
        return count
    }
}

/// Builds an `nghttp2_nv` array over one contiguous byte buffer for the duration of a call
/// (nghttp2 copies names and values when a response is submitted).
enum HeaderBlock {
    static func withNameValues<R>(
        _ fields: [(String, String)], _ body: (UnsafeMutablePointer<nghttp2_nv>, Int) -> R
    ) -> R {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(fields.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count })
        for (name, value) in fields {
            bytes.append(contentsOf: name.utf8)
            bytes.append(contentsOf: value.utf8)
        }
        return bytes.withUnsafeMutableBufferPointer { raw in
            withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: fields.count) { nva in
                var offset = 0
                for (index, (name, value)) in fields.enumerated() {
                    let nameLength = name.utf8.count
                    let valueLength = value.utf8.count
                    nva[index] = nghttp2_nv(
                        name: raw.baseAddress! + offset, value: raw.baseAddress! + offset + nameLength,
                        namelen: nameLength, valuelen: valueLength, flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
                    offset += nameLength + valueLength
                }
                return body(nva.baseAddress!, fields.count)
            }
        }
    }
}
