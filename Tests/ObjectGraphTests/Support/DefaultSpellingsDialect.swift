@_spi(StoreImplementation) import DataStackStorage
@_spi(StoreImplementation) import ObjectGraph

/// SQLite's spellings where the protocol requires one, and the protocol's
/// defaults elsewhere: numbered placeholders (`?1`, as a store across a
/// network writes them) and no ``SQLDialect/jsonArrayTable(_:alias:)``.
/// With `refusesStringTests`, a database without string comparisons
/// (`BEGINSWITH`, …): each throws a ``Refusal`` naming it.
struct DefaultSpellingsDialect: SQLDialect {
    let sqlite = SQLiteDialect()
    var refusesStringTests = false

    struct Refusal: Error, CustomStringConvertible { let description: String }

    func keyArray(_ keys: [Int64]) -> StoredValue { sqlite.keyArray(keys) }
    func keyList(parameter number: Int) -> String { sqlite.keyList(parameter: number) }
    func rankedKeyList(parameter number: Int) -> String { sqlite.rankedKeyList(parameter: number) }
    func jsonArrayElements(_ array: String, asText: Bool) -> String { sqlite.jsonArrayElements(array, asText: asText) }
    func sum(_ value: String) -> String { sqlite.sum(value) }
    func prepareComparison(_ operands: inout [SQLOperand]) throws { try sqlite.prepareComparison(&operands) }
    func folded(_ operand: SQLOperand, options: ComparisonOptions) throws -> SQLOperand { try sqlite.folded(operand, options: options) }
    func stringTest(_ test: SQLStringTest, _ left: SQLOperand, _ right: SQLOperand, options: ComparisonOptions) throws -> String {
        if refusesStringTests { throw Refusal(description: "this database has no \(test)") }
        return try sqlite.stringTest(test, left, right, options: options)
    }
}
