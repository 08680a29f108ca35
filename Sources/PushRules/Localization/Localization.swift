// Server-side localized strings: tables of templates per locale, chosen by the recipient's locale
// through a fallback chain (fr-CA → fr → the default locale), read in templates with `'key' | t`.

import APNs
import JSON
import Synchronization

/// The locale tables of a rule set. Every key exists in the default locale's table (the loader
/// checks), so a lookup that reaches the end of the chain always finds its string.
struct Localization: Sendable {
    /// Normalized tag (lowercase, `-` separators) of the last locale in every chain.
    let defaultLocale: String
    /// Tables by normalized tag.
    let tables: [String: LocaleTable]

    /// Chains already worked out, by the locale as requested; bounded, shared by all threads.
    private let resolved = ResolvedCache()

    init(defaultLocale: String, tables: [String: LocaleTable]) {
        self.defaultLocale = defaultLocale
        self.tables = tables
    }

    static let none = Localization(defaultLocale: "", tables: [:])

    /// The chain for a requested locale such as `fr_CA` or `fr-CA`: each table found among
    /// `fr-ca`, `fr`, then the default's.
    func resolve(_ requested: String?) -> ResolvedLocale {
        let key = requested ?? ""
        if let known = resolved.get(key) { return known }
        let chain = computeChain(requested)
        resolved.put(key, chain)
        return chain
    }

    private func computeChain(_ requested: String?) -> ResolvedLocale {
        guard !tables.isEmpty else { return ResolvedLocale(tag: requested ?? "", tables: []) }
        var chain: [LocaleTable] = []
        if let requested, !requested.isEmpty, requested.utf8.count <= 64 {
            var tag = Self.normalize(requested)
            while true {
                if let table = tables[tag], !chain.contains(where: { $0.tag == tag }) { chain.append(table) }
                guard let dash = tag.lastIndex(of: "-") else { break }
                tag = String(tag[..<dash])
            }
        }
        if let fallback = tables[defaultLocale], !chain.contains(where: { $0.tag == defaultLocale }) {
            chain.append(fallback)
        }
        return ResolvedLocale(tag: chain.first?.name ?? defaultLocale, tables: chain)
    }

    static func normalize(_ tag: String) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(tag.utf8.count)
        for byte in tag.utf8 {
            guard byte < 0x80 else { return String(tag.lowercased().map { $0 == "_" ? "-" : $0 }) }
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): bytes.append(byte + 0x20)
            case UInt8(ascii: "_"): bytes.append(UInt8(ascii: "-"))
            default: bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// One locale's strings, each a compiled template.
struct LocaleTable: Sendable {
    /// Normalized tag, e.g. `fr-ca`.
    let tag: String
    /// The tag as the rules file writes it, e.g. `fr-CA`; what `{{ locale }}` renders.
    let name: String
    let strings: [String: Template]
}

/// The tables to search, most specific first, for one recipient.
struct ResolvedLocale: Sendable {
    /// The locale actually used: the most specific one that has a table (or the default).
    let tag: String
    let tables: [LocaleTable]

    func render(key: String, context: RenderContext) throws(TemplateRenderError) -> JSONValue {
        for table in tables {
            if let template = table.strings[key] {
                let value = try template.render(context)
                if case .string = value { return value }
                return .string(value.compactString)
            }
        }
        if tables.isEmpty {
            throw TemplateRenderError("'\(key)' | t: the rules file has no localization tables")
        }
        throw TemplateRenderError(
            "'\(key)' | t: no locale in \(tables.map(\.name).joined(separator: " → ")) has this key")
    }
}

/// A bounded map from requested locale to its chain (cleared when full, so hostile locales cannot
/// grow it without limit).
final class ResolvedCache: Sendable {
    static let capacity = 256
    private let entries = Mutex<[String: ResolvedLocale]>([:])

    func get(_ key: String) -> ResolvedLocale? { entries.withLock { $0[key] } }

    func put(_ key: String, _ value: ResolvedLocale) {
        guard key.utf8.count <= 64 else { return }
        entries.withLock { entries in
            if entries.count >= Self.capacity { entries.removeAll(keepingCapacity: true) }
            entries[key] = value
        }
    }
}
