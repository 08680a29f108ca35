// Socket addresses from getaddrinfo, kept by value so a connect can walk through them.

import CNghttp2
import Glibc

/// A resolved socket address.
struct SocketAddress: CustomStringConvertible, Sendable {
    private var storage = sockaddr_storage()
    private var length: socklen_t = 0

    var family: Int32 { Int32(storage.ss_family) }

    func withSockAddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        withUnsafeBytes(of: storage) { raw in
            body(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), length)
        }
    }

    var description: String {
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        var service = [CChar](repeating: 0, count: Int(NI_MAXSERV))
        let result = withSockAddr { address, length in
            getnameinfo(
                address, length, &host, socklen_t(host.count), &service, socklen_t(service.count),
                NI_NUMERICHOST | NI_NUMERICSERV)
        }
        guard result == 0 else { return "an address" }
        let hostText = cString(host)
        return hostText.contains(":") ? "[\(hostText)]:\(cString(service))" : "\(hostText):\(cString(service))"
    }

    /// getaddrinfo for TCP; blocking unless `numericOnly`.
    static func resolve(host: String, port: Int, numericOnly: Bool) -> Result<[SocketAddress], HTTP2ClientError> {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = numericOnly ? AI_NUMERICHOST | AI_NUMERICSERV : AI_NUMERICSERV
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        let endpoint = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        guard status == 0, let list else {
            return .failure(
                HTTP2ClientError(
                    .connectFailed,
                    "cannot resolve host '\(host)': \(String(cString: gai_strerror(status)))", endpoint: endpoint))
        }
        defer { freeaddrinfo(list) }
        var addresses: [SocketAddress] = []
        var entry: UnsafeMutablePointer<addrinfo>? = list
        while let current = entry {
            if let address = current.pointee.ai_addr,
                current.pointee.ai_addrlen <= MemoryLayout<sockaddr_storage>.size
            {
                var socketAddress = SocketAddress()
                withUnsafeMutableBytes(of: &socketAddress.storage) { raw in
                    raw.copyMemory(from: UnsafeRawBufferPointer(start: address, count: Int(current.pointee.ai_addrlen)))
                }
                socketAddress.length = current.pointee.ai_addrlen
                addresses.append(socketAddress)
            }
            entry = current.pointee.ai_next
        }
        guard !addresses.isEmpty else {
            return .failure(HTTP2ClientError(.connectFailed, "host '\(host)' has no address", endpoint: endpoint))
        }
        return .success(addresses)
    }
}
