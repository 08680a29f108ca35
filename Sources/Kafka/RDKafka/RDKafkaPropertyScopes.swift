// Which client each librdkafka property is for, read from librdkafka's own property table, so that the
// worker's shared property map gives each client only what applies to it: a consumer property handed to
// a producer does nothing but make librdkafka warn at start-up, and the other way round.

import CRdKafka
import Glibc

enum RDKafkaPropertyScopes {
    enum Scope { case both, consumer, producer }

    /// Property name → scope, from `rd_kafka_conf_properties_show` (the table CONFIGURATION.md is made
    /// from); empty if it cannot be read, and then every property goes to both clients.
    static let table: [String: Scope] = read()

    /// Whether `name` applies to a client of `kind`; unknown names do (librdkafka names the bad ones).
    static func applies(_ name: String, to kind: RDKafkaClient.Kind) -> Bool {
        switch table[name] {
        case .consumer: return kind == .consumer
        case .producer: return kind == .producer
        case .both, nil: return true
        }
    }

    private static func read() -> [String: Scope] {
        var buffer: UnsafeMutablePointer<CChar>?
        var size = 0
        guard let stream = open_memstream(&buffer, &size) else { return [:] }
        rd_kafka_conf_properties_show(stream)
        fclose(stream)
        guard let buffer else { return [:] }
        defer { free(buffer) }
        var table: [String: Scope] = [:]
        // Rows look like "linger.ms                                |  P  | 0 .. 900000 | ...".
        for line in String(cString: buffer).split(separator: "\n") {
            let columns = line.split(separator: "|", maxSplits: 2, omittingEmptySubsequences: false)
            guard columns.count == 3 else { continue }
            let name = columns[0].trimmingSpaces
            switch columns[1].trimmingSpaces {
            case "C": table[name] = .consumer
            case "P": table[name] = .producer
            case "*": table[name] = .both
            default: continue
            }
        }
        return table
    }
}

extension Substring {
    fileprivate var trimmingSpaces: String {
        String(drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
    }
}
