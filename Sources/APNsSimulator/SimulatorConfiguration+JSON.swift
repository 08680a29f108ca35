// The simulator's configuration file (JSON): every key checked, unknown keys refused, and errors that
// name the key path, what was there and what would be right. See `SimulatorConfiguration.fileFormat`.

import APNs
public import JSON

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension SimulatorConfiguration {
    /// The file format, for `--help` and the README.
    public static let fileFormat = #"""
        {
          "host": "127.0.0.1", "port": 0, "environment": "sandbox",
          "tls": {"certFile": "cert.pem", "keyFile": "key.pem", "caFile": "ca.pem"},   // or {"hosts": [...]}
          "caOut": "/tmp/sim-ca.pem",
          "auth": {"mode": "token", "keys": [{"keyId": "ABC123DEFG", "publicKeyFile": "key.pub",
                                              "teamId": "TEAM123456"}],
                   "maxAgeSeconds": 3600, "minUpdateIntervalSeconds": 1200},
                  // or {"mode": "certificate", "clientCaFile": "clients-ca.pem"} or {"mode": "none"}
          "allowedBundles": ["com.example.app"],
          "devices": {"unregistered": ["<hex>", {"token": "<hex>", "timestamp": 1700000000000}],
                      "bad": ["<hex>"], "owners": {"<hex>": "com.other.app"},
                      "unregisteredRate": 0.05, "badTokenRate": 0.0},
          "faults": {"failRate": 0.1, "failStatus": 503, "retryAfter": 5, "stallRate": 0, "dropRate": 0,
                     "latency": {"fixedMs": 5, "uniformMs": 10},       // or "exponentialMeanMs"
                     "handshakeMs": 200,                                // each TLS handshake held this long
                     "goAwayAfterStreams": 100, "maxConcurrentStreams": 1000,
                     "streamLimitAfterRefusedToken": 1,                 // a refused token throttles its connection
                     "deviceLimit": {"requests": 5, "perMs": 1000},     // then 429 TooManyRequests
                     "script": [{"request": 3, "action": "fail", "status": 503, "retryAfter": 2},
                                {"stream": 5, "action": "goaway", "processThisStream": false},
                                {"request": 7, "action": "stall"}, {"stream": 9, "action": "drop"},
                                {"stream": 1, "action": "delay", "ms": 100},
                                {"stream": 2, "action": "maxConcurrentStreams", "value": 1}]},
          "acceptedCapacity": 10000, "maximumConnections": 512, "seed": 1
        }
        """#

    /// Reads a configuration file. Relative file names inside it are resolved against its directory.
    public init(contentsOfFile path: String) throws(SimulatorError) {
        let text = try readTextFile(path, what: "simulator configuration")
        let value: JSONValue
        do {
            value = try JSONValue(parsing: text)
        } catch {
            throw SimulatorError(.configuration, "\(path): not valid JSON: \(error)")
        }
        let directory = path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : "."
        do {
            try self.init(json: value, baseDirectory: directory)
        } catch {
            throw SimulatorError(.configuration, "\(path): \(error.message)")
        }
    }

    /// Builds a configuration from a JSON object in the file format.
    public init(json: JSONValue, baseDirectory: String = ".") throws(SimulatorError) {
        self.init()
        let root = try ConfigObject(json, path: "")
        try root.allowOnly([
            "host", "port", "environment", "tls", "caOut", "auth", "allowedBundles", "devices",
            "faults", "acceptedCapacity", "maximumConnections", "seed",
        ])
        if let host = try root.string("host") { self.host = host }
        if let port = try root.integer("port", in: 0...65535) { self.port = port }
        if let environment = try root.string("environment") {
            guard let parsed = try? APNsEnvironment(parsing: environment) else {
                throw root.error("environment", "must be sandbox (or development) or production, got '\(environment)'")
            }
            self.environment = parsed
        }
        if let tls = try root.object("tls") {
            try tls.allowOnly(["certFile", "keyFile", "caFile", "hosts"])
            let certificate = try tls.string("certFile")
            let key = try tls.string("keyFile")
            switch (certificate, key) {
            case (let certificate?, let key?):
                self.tls = .files(
                    certificate: resolve(certificate, baseDirectory), privateKey: resolve(key, baseDirectory),
                    caFile: try tls.string("caFile").map { resolve($0, baseDirectory) })
            case (nil, nil):
                if let hosts = try tls.strings("hosts") { self.tls = .generated(hosts: hosts) }
            default:
                throw tls.error("", "give both certFile and keyFile, or neither to generate a certificate")
            }
        }
        if let caOut = try root.string("caOut") { caOutputPath = resolve(caOut, baseDirectory) }
        if let auth = try root.object("auth") { authentication = try Self.authentication(auth, baseDirectory) }
        if let bundles = try root.strings("allowedBundles") { allowedBundles = Set(bundles) }
        if let devices = try root.object("devices") { self.devices = try Self.devices(devices) }
        if let faults = try root.object("faults") { self.faults = try Self.faults(faults) }
        if let capacity = try root.integer("acceptedCapacity", in: 0...10_000_000) { acceptedCapacity = capacity }
        if let maximum = try root.integer("maximumConnections", in: 1...100_000) { maximumConnections = maximum }
        if let seed = try root.integer("seed", in: 0...Int.max) { self.seed = UInt64(seed) }
        try validate()
    }

    private static func authentication(_ auth: ConfigObject, _ baseDirectory: String)
        throws(SimulatorError) -> SimulatorAuthentication
    {
        let mode = try auth.string("mode") ?? "none"
        switch mode {
        case "none":
            try auth.allowOnly(["mode"])
            return .none
        case "certificate":
            try auth.allowOnly(["mode", "clientCaFile"])
            guard let file = try auth.string("clientCaFile") else {
                throw auth.error("clientCaFile", "is required for certificate authentication (a PEM CA file)")
            }
            return .certificate(clientCAFile: resolve(file, baseDirectory))
        case "token":
            try auth.allowOnly(["mode", "keys", "maxAgeSeconds", "minUpdateIntervalSeconds"])
            guard let keys = try auth.objects("keys"), !keys.isEmpty else {
                throw auth.error(
                    "keys",
                    "token authentication needs at least one key: "
                        + #"[{"keyId": "ABC123DEFG", "publicKeyFile": "key.pub"}]"#)
            }
            var result: [SimulatorProviderKey] = []
            for key in keys {
                try key.allowOnly(["keyId", "publicKeyFile", "publicKey", "teamId"])
                guard let keyID = try key.string("keyId") else { throw key.error("keyId", "is required") }
                let pem: String
                if let file = try key.string("publicKeyFile") {
                    pem = try readTextFile(resolve(file, baseDirectory), what: "public key for \(keyID)")
                } else if let inline = try key.string("publicKey") {
                    pem = inline
                } else {
                    throw key.error("publicKeyFile", "is required (a PEM public key file), or give publicKey inline")
                }
                result.append(SimulatorProviderKey(keyID: keyID, publicKeyPEM: pem, teamID: try key.string("teamId")))
            }
            return .providerToken(
                keys: result, maximumAgeSeconds: try auth.integer("maxAgeSeconds", in: 1...Int.max) ?? 3600,
                minimumUpdateIntervalSeconds: try auth.integer("minUpdateIntervalSeconds", in: 0...Int.max) ?? 1200)
        default:
            throw auth.error("mode", "must be token, certificate or none, got '\(mode)'")
        }
    }

    private static func devices(_ object: ConfigObject) throws(SimulatorError) -> DeviceStates {
        try object.allowOnly(["unregistered", "bad", "owners", "unregisteredRate", "badTokenRate"])
        var states = DeviceStates()
        if let entries = try object.array("unregistered") {
            for (index, entry) in entries.enumerated() {
                let path = object.path("unregistered") + "[\(index)]"
                if let token = entry.stringValue {
                    states.unregistered[try normalizedToken(token, path: path)] = .some(nil)
                } else {
                    let item = try ConfigObject(entry, path: path)
                    try item.allowOnly(["token", "timestamp"])
                    guard let token = try item.string("token") else { throw item.error("token", "is required") }
                    let timestamp = try item.integer("timestamp", in: 0...Int.max).map { Int64($0) }
                    states.unregistered[try normalizedToken(token, path: item.path("token"))] = .some(timestamp)
                }
            }
        }
        if let bad = try object.strings("bad") {
            for (index, token) in bad.enumerated() {
                states.badTokens.insert(try normalizedToken(token, path: object.path("bad") + "[\(index)]"))
            }
        }
        if let owners = try object.object("owners") {
            for member in owners.members {
                guard let bundle = member.value.stringValue else {
                    throw owners.error(member.key, "must be a bundle id string, got \(member.value.typeName)")
                }
                states.bundleByToken[try normalizedToken(member.key, path: owners.path(member.key))] = bundle
            }
        }
        if let rate = try object.number("unregisteredRate") { states.unregisteredRate = rate }
        if let rate = try object.number("badTokenRate") { states.badTokenRate = rate }
        return states
    }

    private static func normalizedToken(_ token: String, path: String) throws(SimulatorError) -> String {
        do {
            return try DeviceToken(token).hex
        } catch {
            throw SimulatorError(.configuration, "\(path): \(error.message)")
        }
    }

    private static func faults(_ object: ConfigObject) throws(SimulatorError) -> SimulatorFaults {
        try object.allowOnly([
            "failRate", "failStatus", "retryAfter", "stallRate", "dropRate", "latency", "handshakeMs",
            "goAwayAfterStreams", "maxConcurrentStreams", "streamLimitAfterRefusedToken", "script", "deviceLimit",
        ])
        var faults = SimulatorFaults()
        if let rate = try object.number("failRate") { faults.failureRate = rate }
        let retryAfter = try object.integer("retryAfter", in: 0...86_400)
        let status = try object.integer("failStatus", in: 100...599) ?? 503
        guard let failure = InjectedFailure.forStatus(status, retryAfterSeconds: retryAfter) else {
            throw object.error("failStatus", "must be 429, 500 or 503, got \(status)")
        }
        faults.failure = failure
        if let rate = try object.number("stallRate") { faults.stallRate = rate }
        if let rate = try object.number("dropRate") { faults.dropConnectionRate = rate }
        if let latency = try object.object("latency") { faults.latency = try Self.latency(latency) }
        if let handshake = try object.number("handshakeMs") { faults.handshakeMilliseconds = handshake }
        faults.goAwayAfterStreams = try object.integer("goAwayAfterStreams", in: 1...Int.max)
        if let maximum = try object.integer("maxConcurrentStreams", in: 1...Int(UInt32.max)) {
            faults.maxConcurrentStreams = UInt32(maximum)
        }
        if let limit = try object.integer("streamLimitAfterRefusedToken", in: 1...Int(UInt32.max)) {
            faults.streamLimitAfterRefusedToken = UInt32(limit)
        }
        if let script = try object.objects("script") {
            faults.script = try script.map { entry throws(SimulatorError) in try Self.scriptEntry(entry) }
        }
        if let limit = try object.object("deviceLimit") {
            try limit.allowOnly(["requests", "perMs"])
            guard let requests = try limit.integer("requests", in: 1...Int.max) else {
                throw limit.error("requests", "is required: requests a device may get per window")
            }
            guard let window = try limit.integer("perMs", in: 1...86_400_000) else {
                throw limit.error("perMs", "is required: the window, in milliseconds")
            }
            faults.deviceLimit = DeviceRequestLimit(requests: requests, windowMilliseconds: window)
        }
        return faults
    }

    /// `{"fixedMs": 5, "uniformMs": 10}` or `{"fixedMs": 5, "exponentialMeanMs": 3}`.
    static func latency(_ object: ConfigObject) throws(SimulatorError) -> LatencyDistribution {
        try object.allowOnly(["fixedMs", "uniformMs", "exponentialMeanMs"])
        var latency = LatencyDistribution(fixedMilliseconds: try object.number("fixedMs") ?? 0)
        let uniform = try object.number("uniformMs")
        let exponential = try object.number("exponentialMeanMs")
        if uniform != nil && exponential != nil {
            throw object.error("", "give uniformMs or exponentialMeanMs, not both")
        }
        if let uniform { latency.jitter = .uniform(maximumMilliseconds: uniform) }
        if let exponential { latency.jitter = .exponential(meanMilliseconds: exponential) }
        return latency
    }

    private static func scriptEntry(_ entry: ConfigObject) throws(SimulatorError) -> ScriptedFault {
        try entry.allowOnly(
            ["request", "stream", "action", "status", "retryAfter", "processThisStream", "ms", "value"])
        let request = try entry.integer("request", in: 1...Int.max)
        let stream = try entry.integer("stream", in: 1...Int.max)
        let trigger: ScriptedFault.Trigger
        switch (request, stream) {
        case (let n?, nil): trigger = .request(n)
        case (nil, let n?): trigger = .stream(n)
        default:
            throw entry.error(
                "", "give exactly one of request (Nth request overall) or stream (Nth of each connection)")
        }
        guard let name = try entry.string("action") else {
            throw entry.error("action", "is required: fail, stall, drop, goaway, delay or maxConcurrentStreams")
        }
        let action: FaultAction
        switch name {
        case "fail":
            let status = try entry.integer("status", in: 100...599) ?? 503
            guard
                let failure = InjectedFailure.forStatus(
                    status, retryAfterSeconds: try entry.integer("retryAfter", in: 0...86_400))
            else { throw entry.error("status", "must be 429, 500 or 503, got \(status)") }
            action = .fail(failure)
        case "stall": action = .stall
        case "drop": action = .dropConnection
        case "goaway": action = .goAway(processThisStream: try entry.bool("processThisStream") ?? true)
        case "delay":
            guard let ms = try entry.integer("ms", in: 0...3_600_000) else { throw entry.error("ms", "is required") }
            action = .delay(milliseconds: ms)
        case "maxConcurrentStreams":
            guard let value = try entry.integer("value", in: 1...Int(UInt32.max)) else {
                throw entry.error("value", "is required")
            }
            action = .setMaxConcurrentStreams(UInt32(value))
        default:
            throw entry.error(
                "action", "must be fail, stall, drop, goaway, delay or maxConcurrentStreams, got '\(name)'")
        }
        return ScriptedFault(trigger, action)
    }
}

private func resolve(_ file: String, _ baseDirectory: String) -> String {
    file.hasPrefix("/") || baseDirectory == "." ? file : baseDirectory + "/" + file
}

/// Reads a whole text file; the error names the file and what it was for.
func readTextFile(_ path: String, what: String) throws(SimulatorError) -> String {
    guard let file = fopen(path, "r") else {
        throw SimulatorError(
            .configuration, "cannot read the \(what) file \(path): \(String(cString: strerror(errno)))")
    }
    defer { fclose(file) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 16 * 1024)
    while true {
        let count = fread(&buffer, 1, buffer.count, file)
        if count <= 0 { break }
        bytes.append(contentsOf: buffer[..<count])
        if bytes.count > 16 * 1024 * 1024 {
            throw SimulatorError(.configuration, "the \(what) file \(path) is over 16 MiB")
        }
    }
    return String(decoding: bytes, as: UTF8.self)
}

/// A JSON object being read as configuration, with its key path for error messages.
struct ConfigObject {
    let members: JSONObject
    let prefix: String

    init(_ value: JSONValue, path: String) throws(SimulatorError) {
        guard case .object(let object) = value else {
            throw SimulatorError(
                .configuration,
                "\(path.isEmpty ? "the configuration" : path) must be a JSON object, "
                    + "got \(value.typeName)")
        }
        members = object
        prefix = path
    }

    func path(_ key: String) -> String {
        key.isEmpty ? (prefix.isEmpty ? "configuration" : prefix) : (prefix.isEmpty ? key : prefix + "." + key)
    }

    func error(_ key: String, _ message: String) -> SimulatorError {
        SimulatorError(.configuration, "\(path(key)): \(message)")
    }

    func allowOnly(_ keys: [String]) throws(SimulatorError) {
        for key in members.keys where !keys.contains(key) {
            let hint = Spelling.closest(to: key, among: keys).map { " (did you mean \($0)?)" } ?? ""
            throw error(key, "unknown key\(hint); known keys: \(keys.joined(separator: ", "))")
        }
    }

    func string(_ key: String) throws(SimulatorError) -> String? {
        guard let value = members[key] else { return nil }
        guard let text = value.stringValue else { throw error(key, "must be a string, got \(value.typeName)") }
        return text
    }

    func bool(_ key: String) throws(SimulatorError) -> Bool? {
        guard let value = members[key] else { return nil }
        guard let flag = value.boolValue else { throw error(key, "must be true or false, got \(value.typeName)") }
        return flag
    }

    func number(_ key: String) throws(SimulatorError) -> Double? {
        guard let value = members[key] else { return nil }
        guard let number = value.doubleValue else { throw error(key, "must be a number, got \(value.typeName)") }
        return number
    }

    func integer(_ key: String, in range: ClosedRange<Int>) throws(SimulatorError) -> Int? {
        guard let value = members[key] else { return nil }
        guard let number = value.intValue, let int = Int(exactly: number) else {
            throw error(key, "must be a whole number, got \(value.compactString)")
        }
        guard range.contains(int) else {
            throw error(key, "must be between \(range.lowerBound) and \(range.upperBound), got \(int)")
        }
        return int
    }

    func object(_ key: String) throws(SimulatorError) -> ConfigObject? {
        guard let value = members[key] else { return nil }
        return try ConfigObject(value, path: path(key))
    }

    func array(_ key: String) throws(SimulatorError) -> [JSONValue]? {
        guard let value = members[key] else { return nil }
        guard let items = value.arrayValue else { throw error(key, "must be an array, got \(value.typeName)") }
        return items
    }

    func strings(_ key: String) throws(SimulatorError) -> [String]? {
        guard let items = try array(key) else { return nil }
        var result: [String] = []
        for (index, item) in items.enumerated() {
            guard let text = item.stringValue else {
                throw error(key, "item \(index) must be a string, got \(item.typeName)")
            }
            result.append(text)
        }
        return result
    }

    func objects(_ key: String) throws(SimulatorError) -> [ConfigObject]? {
        guard let items = try array(key) else { return nil }
        var result: [ConfigObject] = []
        for (index, item) in items.enumerated() {
            result.append(try ConfigObject(item, path: path(key) + "[\(index)]"))
        }
        return result
    }
}
