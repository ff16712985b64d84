import Foundation
import Testing
@testable import ObjectGraph
@testable import DataStackStorage
@testable import DataStackStores

/// A `FetchExpression` compiled on its own, as a statement other than a fetch
/// (a batch update's `SET`) uses it, and checked against an entity.
@Suite struct FetchExpressionSQLTests {
    func compile(_ expression: FetchExpression, entity: String = "Company") throws
        -> (sql: String, joins: [String], bindings: [PropertyValue]) {
        try expression.sql(for: predicateEntity(entity), schema: PredicateTestSchema(), rootAlias: "t0")
    }

    @Test func arithmeticOnKeyPathsCompilesWithParametersAndJoins() throws {
        let compiled = try compile(.keyPath("parent.price") * 1.1 + .keyPath("volume"))
        #expect(compiled.sql == "((t0_1.ZPRICE * ?1) + t0.ZVOLUME)")
        #expect(compiled.joins == ["LEFT JOIN ZCOMPANY t0_1 ON t0_1.Z_PK = t0.ZPARENT"])
        #expect(compiled.bindings == [.double(1.1)])
        #expect(try compile(.keyPath("volume") / 2).sql == "(CAST(t0.ZVOLUME AS REAL) / ?1)")
        // After a statement's own parameters, as a batch update's second SET value is.
        let second = FetchExpression.keyPath("volume") * 2 + 1
        #expect(try second.sql(for: predicateEntity("Company"), schema: PredicateTestSchema(), rootAlias: "ZCOMPANY", parametersBefore: 3).sql
            == "((ZCOMPANY.ZVOLUME * ?4) + ?5)")
    }

    @Test func aggregatesCompileToSQLiteFunctions() throws {
        #expect(try compile(.sum(.keyPath("price"))).sql == "TOTAL(t0.ZPRICE)")
        #expect(try compile(.average(.keyPath("price"))).sql == "AVG(t0.ZPRICE)")
        #expect(try compile(.count()).sql == "COUNT(t0.Z_PK)")
        #expect(try compile(.countDistinct(.keyPath("name"))).sql == "COUNT(DISTINCT t0.ZNAME)")
        #expect(try compile(.max(.keyPath("company.volume")), entity: "Update").sql == "MAX(t0_1.ZVOLUME)")
    }

    @Test func checkingGivesTheValueTypeOrNamesTheProblem() throws {
        let company = predicateEntity("Company")
        #expect(try (FetchExpression.keyPath("volume") + 1).check(for: company, at: "SET volume") == .integer64)
        #expect(try (FetchExpression.keyPath("volume") * 1.5).check(for: company, at: "SET volume") == .double)
        #expect(try (FetchExpression.keyPath("founded") + 60).check(for: company, at: "SET founded") == .date)
        let error = #expect(throws: FetchExpressionError.self) {
            try (FetchExpression.keyPath("name") * 2).check(for: company, at: "SET name")
        }
        #expect(error?.code == .needsNumbers)
        #expect(error?.description == "Company, SET name: * needs numbers, and name is string")
    }

    @Test func anExpressionPrintsInCoreDataFormat() {
        #expect(FetchExpression.sum(.keyPath("price") * 2).description == "sum:((price * 2))")
        #expect(FetchExpression.count().description == "count:(SELF)")
    }

    @Test func literalsAreConstants() {
        // A string literal is a string, not a key path: `["note": "repriced"]` in a batch update sets a text.
        let literals: [FetchExpression] = ["repriced", true, nil, 2, 1.5]
        #expect(literals == [.constant(.string("repriced")), .constant(.bool(true)), .constant(.null), .constant(.integer(2)), .constant(.double(1.5))])
    }
}
