import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - A long key list that drives the query

extension SelectQuery {
    /// A fetch whose whole predicate is `attribute IN {long list of constants}`,
    /// as a join: the list's rows (its JSON array, ``PredicateSQLList``) read
    /// first, each finding its row through an index on the attribute's column.
    struct KeyListJoin {
        /// The JSON array, bound as the query's first parameter.
        let json: String
        /// The list's rows as a `FROM` item (alias `kl`), and the column holding each element.
        let rows: String
        let value: String
        /// The attribute's column in `t0`.
        let column: String
    }

    /// The predicate as a join of its key list with the table, when that
    /// finds exactly the rows `attribute IN (SELECT value FROM json_each(?))`
    /// finds; nil otherwise.
    ///
    /// Why: for `IN (subquery)` SQLite first builds an ephemeral index of the
    /// list, a B-tree insert per element, then seeks each element in the
    /// column's index — for the 10,000 keys of an upsert's chunk the index
    /// build cost as much as the seeks (about 9 k instructions a key in all,
    /// against 4 k for the join, `CROSS JOIN` keeping the list outside).
    ///
    /// The join is taken only where it cannot change the rows found:
    /// - the left side is one stored attribute of the fetched entity, whose
    ///   column leads an index the model declares (else each element would
    ///   scan the table);
    /// - the list's values are of the attribute's family (text for a string
    ///   attribute, integers for an integer one): compared as `IN` compares
    ///   them, with the column's affinity and collation (the column is the
    ///   left operand of `=`, as of `IN`);
    /// - its elements are distinct: the join would return a row once per
    ///   element that matches it (a list with repeats keeps `IN`); tested
    ///   here unless the predicate's builder vouches for it
    ///   (``FetchPredicate/listIsDistinct``, the upsert's lookup).
    ///
    /// Rows come in the list's order rather than the index's; a fetch without
    /// sort descriptors promises no order, and one with them is sorted as before.
    static func keyListJoin(of predicate: FetchPredicate, entity: EntityDescription, mapping: TableLayout.EntityMapping,
                            schema: TableLayout) -> KeyListJoin? {
        guard case .comparison(.keyPath(let keys), .in, .collection(let elements), let options, .direct) = predicate.expression,
              keys.count == 1, let attribute = entity.propertiesByName[keys[0]] as? AttributeDescription,
              !attribute.isTransient, !attribute.archivesValues, !attribute.storesExternalBinaryData,
              let column = mapping.columns[attribute.index]?.name,
              let rows = schema.dialect.jsonArrayTable(schema.dialect.placeholder(1), alias: "kl"),
              let list = PredicateSQLList.json(elements, options: options) else { return nil }
        let sameFamily = switch attribute.type {
        case .string: list.isText
        case .integer16, .integer32, .integer64: !list.isText
        default: false
        }
        // A list its builder vouches for (FetchPredicate.listIsDistinct) needs only its values'
        // kinds checked: distinct strings (integers) bind as distinct text (integers).
        guard sameFamily, predicate.listIsDistinct ? areStringsOrIntegers(elements, asText: list.isText)
                                                   : areDistinct(elements, asText: list.isText),
              schema.declaredIndexes().contains(where: { $0.table == mapping.table && $0.columns.first == column }) else { return nil }
        return KeyListJoin(json: list.json, rows: rows, value: "kl.value", column: column)
    }

    /// Whether every element is a string (`asText`) or an integer: values
    /// that bind as themselves, so that distinct ones bind as distinct values
    /// (text byte for byte: strings that Swift tells apart differ in bytes).
    private static func areStringsOrIntegers(_ elements: [PredicateNode], asText: Bool) -> Bool {
        elements.allSatisfy { element in
            switch element {
            case .constant(.string): asText
            case .constant(.integer): !asText
            default: false
            }
        }
    }

    /// Whether the list's bound values are distinct, as SQLite compares them
    /// (text byte for byte, the column's `BINARY` collation). Strings are told
    /// apart by a 64-bit FNV-1a hash of their UTF-8 bytes: two with one hash
    /// count as repeats, which keeps `IN` — never a row returned twice. (A
    /// `Set<String>` cost 640 instructions a key, hashing a normalized form.)
    private static func areDistinct(_ elements: [PredicateNode], asText: Bool) -> Bool {
        var seen = Set<UInt64>(minimumCapacity: elements.count)
        for case .constant(let value) in elements {
            let hash: UInt64
            switch PredicateScalar.binding(for: value) {
            case .string(let string) where asText:
                var bytes = string
                hash = bytes.withUTF8 { utf8 in
                    utf8.reduce(0xcbf2_9ce4_8422_2325 as UInt64) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 }
                }
            case .integer(let number) where !asText:
                hash = UInt64(bitPattern: number)
            default:
                return false
            }
            guard seen.insert(hash).inserted else { return false }
        }
        return true
    }
}
