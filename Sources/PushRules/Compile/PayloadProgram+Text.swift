// Text leaves of a payload program: a template that renders text ("{{ a }} wrote", "{{ 'key' | t }}")
// is written into the JSON string as it is rendered, its constant text escaped once at load, instead
// of being put together as a String and escaped afterwards.

import JSON

extension PayloadProgram {
    /// A template leaf whose value is text: written as a JSON string, or left out when it is one
    /// expression that gives null.
    struct TextLeaf: Sendable {
        enum Piece: Sendable {
            /// Constant text, escaped.
            case bytes([UInt8])
            case expression(TemplateExpression)
        }

        let pieces: [Piece]
        /// The template is one expression and nothing else: its null leaves the member out, and a number
        /// or boolean becomes its JSON text (`FieldType.text`). In longer templates null is an error.
        let isSingleExpression: Bool

        /// The leaf for a template leaf whose value is certainly text when it renders, or nil: a
        /// template of several parts (`.text` or `.any`), or one expression converted to `.text`.
        init?(_ template: Template, type: FieldType) {
            let isSingleExpression: Bool
            if template.parts.count == 1, case .expression = template.parts[0] {
                guard case .text = type else { return nil }
                isSingleExpression = true
            } else {
                switch type {
                case .text, .any: isSingleExpression = false
                default: return nil
                }
            }
            self.isSingleExpression = isSingleExpression
            pieces = template.parts.map { part in
                switch part {
                case .text(let text):
                    var escaped: [UInt8] = []
                    JSONWriter.writeStringContents(text, into: &escaped)
                    return .bytes(escaped)
                case .expression(let expression):
                    return .expression(expression)
                }
            }
        }

        enum Written {
            case text
            /// The single expression gave null: nothing was written.
            case null
            /// The template would fail or give something other than text; the output is unchanged.
            case unwritable
        }

        /// Writes the value as a JSON string, as `ValueTemplate.render(_:)` and `JSONWriter` would.
        func write(_ context: RenderContext, into output: inout [UInt8]) -> Written {
            let start = output.count
            output.append(UInt8(ascii: "\""))
            for piece in pieces {
                switch piece {
                case .bytes(let bytes):
                    output.append(contentsOf: bytes)
                case .expression(let expression):
                    switch Self.writeText(of: expression, context, nullAllowed: isSingleExpression, into: &output) {
                    case .text: break
                    case .null:
                        output.removeSubrange(start...)
                        return .null
                    case .unwritable:
                        output.removeSubrange(start...)
                        return .unwritable
                    }
                }
            }
            output.append(UInt8(ascii: "\""))
            return .text
        }

        /// An expression's value as text inside a JSON string: `TemplateExpression.appendText(of:to:)`
        /// (or `FieldType.text`'s conversion, for a single expression), and `| t` as
        /// `ResolvedLocale.render(key:context:)` renders the locale's template.
        static func writeText(
            of expression: TemplateExpression, _ context: RenderContext, nullAllowed: Bool,
            into output: inout [UInt8]
        ) -> Written {
            if case .translate? = expression.filters.last {
                // The key as the filters before `t` give it; `t` itself is written from the locale's template.
                var value = expression.operand.evaluate(context)
                for filter in expression.filters.dropLast() {
                    guard let next = try? filter.apply(to: value, context: context, expression: expression) else {
                        return .unwritable
                    }
                    value = next
                }
                guard case .string(let key)? = value else { return .unwritable }
                return writeTranslation(key, context, into: &output) ? .text : .unwritable
            }
            // A bare path to text without escapes: copied as the bytes it is in the event (exactly what
            // `JSONWriter` writes for it), so an event's long texts are not made into strings to be written.
            if expression.filters.isEmpty, case .variable(let path) = expression.operand,
                let plain = path.lookUpNode(in: context)?.plainTextBytes
            {
                output.append(contentsOf: plain)
                return .text
            }
            guard let value = try? expression.evaluate(context) else { return .unwritable }
            switch value {
            case .string(let text): JSONWriter.writeStringContents(text, into: &output)
            case .int, .double, .bool: JSONWriter.write(value, into: &output)
            case .null: return nullAllowed ? .null : .unwritable
            case .array, .object: return .unwritable
            }
            return .text
        }

        /// The locale's string for `key`: its template's text, or the JSON of a value that is not text.
        static func writeTranslation(_ key: String, _ context: RenderContext, into output: inout [UInt8]) -> Bool {
            for table in context.locale.tables {
                guard let template = table.strings[key] else { continue }
                if template.parts.count == 1, case .expression(let expression) = template.parts[0] {
                    guard let value = try? expression.evaluate(context) else { return false }
                    if case .string(let text) = value {
                        JSONWriter.writeStringContents(text, into: &output)
                    } else {
                        JSONWriter.writeStringContents(value.compactString, into: &output)
                    }
                    return true
                }
                for part in template.parts {
                    switch part {
                    case .text(let text):
                        JSONWriter.writeStringContents(text, into: &output)
                    case .expression(let expression):
                        guard case .text = writeText(of: expression, context, nullAllowed: false, into: &output)
                        else { return false }
                    }
                }
                return true
            }
            return false
        }
    }
}
