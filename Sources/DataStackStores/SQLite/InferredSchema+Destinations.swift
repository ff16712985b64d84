@_spi(StoreImplementation) import DataStackStorage
import Foundation
@_spi(StoreImplementation) import ObjectGraph

// MARK: - Destinations of to-one keys without an entity column

extension InferredSchema {
    /// The tables with a destination for every to-one key.
    ///
    /// A key with an entity column `Z<n>_<COLUMN>` points at entity n, which
    /// has subentities. Any other key points at an entity *without*
    /// subentities (Core Data adds the entity column exactly when the
    /// destination has some), but the schema does not say which: it is
    /// guessed from the names. With the prefix every entity name shares cut
    /// off at a word boundary (`Kik`, `IC`) — the *stem* — and trailing
    /// digits cut off the column's name (`ACCOUNT1` is a second `account`):
    ///
    /// 1. the stem or the name is the column's name, or the name is the
    ///    table's root entity's name followed by the column's name
    ///    (`ZEXTRA` of `KikChat` → `KikChatExtra`);
    /// 2. else the column's name starts with the stem (`ZCHATUSER` → `KikChat`);
    /// 3. else it ends with the stem (`ZLASTSEENMESSAGE` → `KikMessage`).
    ///
    /// A longer stem wins a tie, then the lower `Z_ENT`. A key that fits no
    /// entity points at a stand-in, the first entity without subentities,
    /// and says so (``DestinationSource/none``): do not follow it.
    static func guessingDestinations(of tables: [Table], entities: [Entity]) -> [Table] {
        let parents = Set(entities.map(\.parent))
        let leaves = entities.filter { !parents.contains($0.number) }
        let names = Dictionary(uniqueKeysWithValues: entities.map { ($0.number, $0.name) })
        let prefix = sharedWordPrefix(of: entities.map(\.name))
        let candidates = leaves.map { (number: $0.number, name: $0.name.uppercased(), stem: String($0.name.dropFirst(prefix.count)).uppercased()) }
        return tables.map { table in
            var table = table
            let source = (names[table.root] ?? "").uppercased()
            for index in table.toOnes.indices where !table.toOnes[index].hasEntityColumn {
                let column = columnStem(table.toOnes[index].column)
                var best: (score: Int, length: Int, number: Int64)?
                for candidate in candidates {
                    guard let score = score(column, name: candidate.name, stem: candidate.stem, source: source) else { continue }
                    if best.map({ (score, candidate.stem.count) > ($0.score, $0.length) }) ?? true {
                        best = (score, candidate.stem.count, candidate.number)
                    }
                }
                if let best {
                    table.toOnes[index].destination = best.number
                    table.toOnes[index].destinationSource = .columnName
                } else {
                    table.toOnes[index].destination = leaves.first?.number ?? 0
                    table.toOnes[index].destinationSource = .none
                }
            }
            return table
        }
    }

    /// How well a key column's name fits an entity: 3 (it is the name), 2
    /// (it starts with the stem), 1 (it ends with the stem), or nil.
    private static func score(_ column: String, name: String, stem: String, source: String) -> Int? {
        if column == name || column == stem || name == source + column { return 3 }
        if stem.count > 1 && column.hasPrefix(stem) { return 2 }
        if stem.count > 1 && column.hasSuffix(stem) { return 1 }
        return nil
    }

    /// A key column's name without its `Z` and without the digits Core Data
    /// appends to clashing names (`ZACCOUNT3` → `ACCOUNT`).
    private static func columnStem(_ column: String) -> String {
        let name = column.dropFirst()
        let stripped = name.reversed().drop { $0.isASCII && $0.isNumber }
        return stripped.isEmpty ? String(name) : String(stripped.reversed())
    }

    /// The longest prefix all names share that ends where each of them starts
    /// a new word (an upper-case letter follows): `Kik` for `KikChat` and
    /// `KikUser`, `IC` for `ICNote` and `ICFolder`, empty when there is none.
    static func sharedWordPrefix(of names: [String]) -> String {
        guard let first = names.first else { return "" }
        var prefix = names.dropFirst().reduce(first) { String($0.commonPrefix(with: $1)) }
        while !prefix.isEmpty {
            let fits = names.allSatisfy { name in
                let next = name.dropFirst(prefix.count).first
                return next.map { $0.isUppercase } ?? false
            }
            if fits { return prefix }
            prefix.removeLast()
        }
        return ""
    }
}
