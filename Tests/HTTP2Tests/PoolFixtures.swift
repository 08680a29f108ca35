// The pool the HTTP/2 pool suites test: trusting the test server's certificate, with timeouts short enough
// that a hung case fails the suite rather than CI.

import TestSupport

@testable import HTTP2

func makeTestPool(
    _ server: HTTP2TestServer, group: EventLoopGroup,
    _ adjust: (inout ConnectionPool.Configuration) -> Void = { _ in }
) throws -> ConnectionPool {
    var configuration = ConnectionPool.Configuration(
        host: "127.0.0.1", port: server.port,
        tls: TLSConfiguration(trustRoots: .caFile(server.certificate.certificateFile)))
    configuration.requestTimeout = .seconds(5)
    configuration.connectTimeout = .seconds(3)
    adjust(&configuration)
    return try ConnectionPool(configuration: configuration, group: group)
}
