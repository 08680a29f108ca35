// A deliberately independent HTTP/1.1 client for the observability tests: a raw loopback socket, a
// request written by hand, and the response split by Content-Length. Blocking I/O runs off the
// cooperative pool.

import Dispatch
import Foundation
import Glibc
import TestSupport

struct TestHTTPResponse {
    var status: Int
    var headers: [String: String]
    var body: [UInt8]
    var text: String { String(decoding: body, as: UTF8.self) }
}

struct TestHTTPError: Error, CustomStringConvertible {
    var description: String
}

enum TestHTTPClient {
    /// Sends `method path` to 127.0.0.1:`port` and reads the whole response.
    static func request(_ path: String, method: String = "GET", port: UInt16) async throws -> TestHTTPResponse {
        try await offPool { try requestBlocking(method, path, port: port) }
    }

    /// Runs blocking work on a Dispatch thread and awaits it.
    static func offPool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
        }
    }

    private static func requestBlocking(_ method: String, _ path: String, port: UInt16) throws -> TestHTTPResponse {
        let socketDescriptor = connectLoopback(port: Int(port))
        guard socketDescriptor >= 0 else { throw TestHTTPError(description: "connect to port \(port): errno \(errno)") }
        defer { close(socketDescriptor) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(socketDescriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let request = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n"
        let sent = request.withCString { send(socketDescriptor, $0, strlen($0), 0) }
        guard sent == request.utf8.count else { throw TestHTTPError(description: "short send") }
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = recv(socketDescriptor, &chunk, chunk.count, 0)
            if count < 0 { throw TestHTTPError(description: "recv: errno \(errno)") }
            if count == 0 { break }
            received += chunk[0..<count]
        }
        return try parse(received, method: method)
    }

    private static func parse(_ bytes: [UInt8], method: String) throws -> TestHTTPResponse {
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        guard bytes.count >= 4,
            let end = (0...(bytes.count - 4)).first(where: { Array(bytes[$0..<($0 + 4)]) == separator })
        else { throw TestHTTPError(description: "no end of headers in \(bytes.count) bytes") }
        let head = String(decoding: bytes[..<end], as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = head[0].split(separator: " ")
        guard statusParts.count >= 2, statusParts[0] == "HTTP/1.1", let status = Int(statusParts[1]) else {
            throw TestHTTPError(description: "bad status line '\(head[0])'")
        }
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            headers[line[..<colon].lowercased()] = value
        }
        let body = Array(bytes[(end + 4)...])
        if method != "HEAD", let length = headers["content-length"].flatMap(Int.init), length != body.count {
            throw TestHTTPError(description: "content-length \(length) but \(body.count) body bytes")
        }
        return TestHTTPResponse(status: status, headers: headers, body: body)
    }
}
