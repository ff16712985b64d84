import Foundation
import Testing
@_spi(StoreImplementation) @testable import ObjectGraph

// Every test checks the in-memory answer and the SQLite answer on the same rows
// (see samplePredicateData: companies 1 Apple, 2 Äpfel GmbH (parent 1),
// 3 banana (parent 2, price nil), 4 (name nil, volume nil)).
@Suite struct PredicateEvaluatorTests {
    @Test func numbersCompareAcrossIntegersDoublesDecimalsAndBooleans() throws {
        try checkPredicateAgreement("price > 12", expected: [1])
        try checkPredicateAgreement("price >= 12", expected: [1, 2])
        try checkPredicateAgreement("price == 12", expected: [2])
        try checkPredicateAgreement("price == 12.0", expected: [2])
        try checkPredicateAgreement("price < %@", Decimal(6), expected: [4])
        try checkPredicateAgreement("volume <= 50.5", expected: [2, 3])
        try checkPredicateAgreement("volume > price", expected: [1, 2])
        try checkPredicateAgreement("rating > 3.5", expected: [1])
        try checkPredicateAgreement("rating == 3", expected: [2])
        try checkPredicateAgreement("active == YES", expected: [1, 4])
        try checkPredicateAgreement("active == 0", expected: [2])
        try checkPredicateAgreement("active != TRUE", expected: [2])
        try checkPredicateAgreement("volume == %@", 9007199254740993 as Int64, expected: [])
    }

    @Test func nilMatchesOnlyEqualityWithNil() throws {
        try checkPredicateAgreement("price == nil", expected: [3])
        try checkPredicateAgreement("price != nil", expected: [1, 2, 4])
        try checkPredicateAgreement("price != 5", expected: [1, 2])
        try checkPredicateAgreement("NOT (price > 5)", expected: [4])
        try checkPredicateAgreement("NOT (price > 5) OR price == nil", expected: [3, 4])
        try checkPredicateAgreement("price < %@", nil, expected: [])
        try checkPredicateAgreement("name == %@", nil, expected: [4])
        try checkPredicateAgreement("nil == name", expected: [4])
        try checkPredicateAgreement("parent == nil", expected: [1, 4])
        try checkPredicateAgreement("parent.name == nil", expected: [1, 4])
        try checkPredicateAgreement("name == parent.name", expected: [])
        try checkPredicateAgreement("NOT (name != 'banana') AND TRUEPREDICATE", expected: [3])
    }

    @Test func stringsCompareByBytesUnlessFolded() throws {
        try checkPredicateAgreement("name == 'apple'", expected: [])
        try checkPredicateAgreement("name ==[c] 'apple'", expected: [1])
        try checkPredicateAgreement("name < 'B'", expected: [1])
        try checkPredicateAgreement("name > 'b'", expected: [2, 3])
        try checkPredicateAgreement("name BEGINSWITH 'Ä'", expected: [2])
        try checkPredicateAgreement("name BEGINSWITH[d] 'Apf'", expected: [2])
        try checkPredicateAgreement("name BEGINSWITH[cd] 'apf'", expected: [2])
        try checkPredicateAgreement("name ENDSWITH 'ana'", expected: [3])
        try checkPredicateAgreement("name CONTAINS[c] 'GMBH'", expected: [2])
        try checkPredicateAgreement("name CONTAINS ''", expected: [1, 2, 3])
        try checkPredicateAgreement("NOT name CONTAINS 'a'", expected: [1, 2])
        try checkPredicateAgreement("name LIKE 'b*n?na'", expected: [3])
        try checkPredicateAgreement("name LIKE[c] 'APPLE'", expected: [1])
        try checkPredicateAgreement("name LIKE '*'", expected: [1, 2, 3])
        try checkPredicateAgreement(#"name LIKE 'Apple\*'"#, expected: [])
        try checkPredicateAgreement("name MATCHES '[A-Z].*'", expected: [1])
        try checkPredicateAgreement("name MATCHES[c] 'BANANA|apple'", expected: [1, 3])
        try checkPredicateAgreement("name MATCHES 'ban'", expected: [])
        try checkPredicateAgreement("name MATCHES[d] 'Apfel.*'", expected: [2])
        try checkPredicateAgreement("name == 5", expected: [])
        try checkPredicateAgreement("name > 5", expected: [1, 2, 3])
        try checkPredicateAgreement("price == '12'", expected: [])
        try checkPredicateAgreement("site BEGINSWITH 'https://'", expected: [1])
        try checkPredicateAgreement("site == %@", URL(string: "https://apple.com")!, expected: [1])
    }

    @Test func caseFoldingIsUnicodeFolding() throws {
        let data = PredicateTestData()
        data.add("Company", 1, ["name": .string("STRASSE")])
        data.add("Company", 2, ["name": .string("straße")])
        data.add("Company", 3, ["name": .string("e\u{301}")])
        data.add("Company", 4, ["name": .string("é")])
        try checkPredicateAgreement("name ==[c] 'strasse'", data: data, expected: [1, 2])
        try checkPredicateAgreement("name == 'é'", data: data, expected: [4])
        try checkPredicateAgreement("name ==[d] 'e'", data: data, expected: [3, 4])
    }

    @Test func datesUUIDsAndDataCompareAsStored() throws {
        let reference = Date(timeIntervalSinceReferenceDate: 0)
        try checkPredicateAgreement("founded > %@", reference, expected: [1])
        try checkPredicateAgreement("founded < 0", expected: [2])
        try checkPredicateAgreement("founded BETWEEN %@", [reference.addingTimeInterval(-100), reference], expected: [2])
        try checkPredicateAgreement("code == %@", UUID(uuidString: "00000000-0000-0000-0000-000000000001")!, expected: [1])
        try checkPredicateAgreement("code != nil", expected: [1])
    }

    @Test func inAndBetweenFollowSQL() throws {
        try checkPredicateAgreement("volume IN {7, 50}", expected: [2, 3])
        try checkPredicateAgreement("volume IN {}", expected: [])
        try checkPredicateAgreement("NOT (volume IN {})", expected: [1, 2, 3, 4])
        try checkPredicateAgreement("NOT (volume IN {7, nil})", expected: [])
        try checkPredicateAgreement("volume IN {7, nil}", expected: [3])
        try checkPredicateAgreement("name IN[c] {'APPLE', 'BANANA'}", expected: [1, 3])
        try checkPredicateAgreement("volume IN {'7', 50}", expected: [2])
        try checkPredicateAgreement("'pfe' IN name", expected: [2])
        try checkPredicateAgreement("price BETWEEN {5, 12}", expected: [2, 4])
        try checkPredicateAgreement("NOT (price BETWEEN {5, 12})", expected: [1])
        try checkPredicateAgreement("SELF IN %@", [data(1), data(3)], expected: [1, 3])
        try checkPredicateAgreement("parent == %@", data(1), expected: [2])
        try checkPredicateAgreement("parent != %@", data(1), expected: [3])
        try checkPredicateAgreement("SELF == %@", data(4), expected: [4])
    }

    @Test func keyPathsFollowToOneRelationships() throws {
        try checkPredicateAgreement("parent.name == 'Apple'", expected: [2])
        try checkPredicateAgreement("parent.parent.volume == 1000", expected: [3])
        try checkPredicateAgreement("parent.price > price", expected: [2])
        try checkPredicateAgreement("parent.name BEGINSWITH 'A' OR parent.volume > 10", expected: [2, 3])
    }

    @Test func quantifiersFollowToManyRelationships() throws {
        try checkPredicateAgreement("ANY updates.price > 100", expected: [1])
        try checkPredicateAgreement("updates.price > 100", expected: [1])
        try checkPredicateAgreement("ALL updates.price > 10", expected: [2, 3, 4])
        try checkPredicateAgreement("ALL updates.volume > 0", expected: [1, 3, 4])
        try checkPredicateAgreement("NONE updates.price > 100", expected: [2, 3, 4])
        try checkPredicateAgreement("NOT (ANY updates.price > 100)", expected: [2, 3, 4])
        try checkPredicateAgreement("ANY updates.note CONTAINS[c] 'DOWN'", expected: [1])
        try checkPredicateAgreement("ANY updates.price BETWEEN {10, 12}", expected: [2])
        try checkPredicateAgreement("ANY updates.volume IN {10, 99}", expected: [1])
        try checkPredicateAgreement("ANY updates.price < price", expected: [1, 2])
        try checkPredicateAgreement("%@ IN updates", data("Update", 12), expected: [2])
        try checkPredicateAgreement("ANY updates == %@", data("Update", 13), expected: [1])
        try checkPredicateAgreement("'tech' IN tags.name", expected: [1, 2])
        try checkPredicateAgreement("ANY tags.name == 'food' AND NOT (ANY tags.name == 'tech')", expected: [3])
        try checkPredicateAgreement("ANY parent.updates.price > 100", expected: [2])
        try checkPredicateAgreement("ALL parent.updates.price > 100", expected: [1, 4])
        try checkPredicateAgreement("ANY children.updates.price == 11", expected: [1])
        try checkPredicateAgreement("ANY tags.companies.name == 'banana'", expected: [2, 3])
        try checkPredicateAgreement("ANY updates.company.name == 'Apple'", expected: [1])
    }

    @Test func aggregatesMatchSQLAggregates() throws {
        try checkPredicateAgreement("updates.@count == 3", expected: [1])
        try checkPredicateAgreement("updates.@count == 0", expected: [3, 4])
        try checkPredicateAgreement("updates.@max.price > 189", expected: [1])
        try checkPredicateAgreement("updates.@min.price < 5", expected: [1])
        try checkPredicateAgreement("updates.@sum.price == 379", expected: [1])
        try checkPredicateAgreement("updates.@sum.price == 0", expected: [3, 4])
        try checkPredicateAgreement("updates.@avg.price > 100", expected: [1])
        try checkPredicateAgreement("updates.@avg.price == nil", expected: [3, 4])
        try checkPredicateAgreement("updates.@avg.volume == nil", expected: [2, 3, 4])
        try checkPredicateAgreement("updates.@max.note == 'up'", expected: [1])
        try checkPredicateAgreement("parent.updates.@count > 0", expected: [2, 3])
        try checkPredicateAgreement("tags.@count == 2", expected: [2])
        try checkPredicateAgreement("children.updates.@count == 1", expected: [1])
        try checkPredicateAgreement("updates.@max.company.volume == 1000", expected: [1])
    }

    @Test func subqueriesFilterTheirCollection() throws {
        try checkPredicateAgreement("SUBQUERY(updates, $u, $u.price > 100).@count == 2", expected: [1])
        try checkPredicateAgreement("SUBQUERY(updates, $u, $u.price > 100 AND $u.note == 'up').@count == 1", expected: [1])
        try checkPredicateAgreement("SUBQUERY(updates, $u, price > 10).@count > 0", expected: [1, 2])
        try checkPredicateAgreement("SUBQUERY(updates, $u, $u.price < $u.company.price).@count == 3", expected: [])
        try checkPredicateAgreement("SUBQUERY(updates, $u, $u.company.name == 'Apple').@max.price == 190", expected: [1])
        try checkPredicateAgreement("SUBQUERY(children, $c, SUBQUERY($c.updates, $u, $u.price > $c.price).@count == 0).@count == 1", expected: [1, 2])
        try checkPredicateAgreement("SUBQUERY(updates, $u, ANY $u.company.tags.name == 'tech').@count > 1", expected: [1])
    }

    @Test func logicIsThreeValuedAsInSQL() throws {
        // price nil for 3: `price > 5` is unknown; NOT unknown is unknown; unknown OR true is true.
        try checkPredicateAgreement("NOT (price > 5 AND volume > 0)", expected: [4])
        try checkPredicateAgreement("price > 5 OR volume == 7", expected: [1, 2, 3])
        try checkPredicateAgreement("NOT (price > 5 OR volume == 8)", expected: [])
        try checkPredicateAgreement("NOT (price > 5 OR volume == 8) OR volume == nil", expected: [4])
        try checkPredicateAgreement("TRUEPREDICATE", expected: [1, 2, 3, 4])
        try checkPredicateAgreement("FALSEPREDICATE OR NOT FALSEPREDICATE", expected: [1, 2, 3, 4])
    }

    @Test func missingVariablesAndMisusedQuantifiersThrow() throws {
        let subject = samplePredicateData().subject("Company", 1)
        #expect(throws: FetchPredicateError.self) { try FetchPredicate(format: "price > $limit").evaluate(with: subject) }
        #expect(throws: FetchPredicateError.self) { try FetchPredicate(format: "ALL price > 1").evaluate(with: subject) }
        #expect(throws: FetchPredicateError.self) { try FetchPredicate(format: "name.foo == 1").evaluate(with: subject) }
        #expect(throws: FetchPredicateError.self) { try FetchPredicate(format: "updates.@sum.note == 1").evaluate(with: subject) }
        #expect(throws: ObjectGraphError.self) { try FetchPredicate(format: "prize == 1").evaluate(with: subject) }
        let filled = try FetchPredicate(format: "price > $limit").withSubstitutionVariables(["limit": 100])
        #expect(try filled.evaluate(with: subject))
    }

    @Test func validationNamesTheEntityAndTheKey() throws {
        let company = predicateEntity("Company")
        func reason(_ format: String) -> String? {
            do {
                try FetchPredicate(format: format).validate(for: company)
                return nil
            } catch let error as FetchPredicateError {
                return error.description
            } catch {
                return "\(error)"
            }
        }
        #expect(reason("prize > 5") == "bad predicate at offset 0 in 'prize > 5': entity Company has no property 'prize'")
        #expect(reason("parent.nme == 'x'") == "bad predicate at offset 7 in 'parent.nme == 'x'': entity Company has no property 'nme'")
        #expect(reason("ANY updates.amount > 1")?.contains("entity Update has no property 'amount'") == true)
        #expect(reason("name.given == 'x'")?.contains("'name' is an attribute, not a relationship") == true)
        #expect(reason("ALL price > 1")?.contains("ALL needs a to-many key path") == true)
        #expect(reason("price.@count > 1")?.contains("@count needs a to-many relationship") == true)
        #expect(reason("updates.@sum.note > 1")?.contains("@sum needs a number") == true)
        #expect(reason("SUBQUERY(updates, $u, $u.prize > 1).@count > 0")?.contains("entity Update has no property 'prize'") == true)
        #expect(reason("price > $limit AND ANY updates.price > 1 AND updates.@max.note == 'a'") == nil)
    }
}

private func data(_ pk: Int64) -> ObjectID {
    ObjectID(entity: predicateEntity("Company"), store: predicateStore, primaryKey: pk)
}

private func data(_ entity: String, _ pk: Int64) -> ObjectID {
    ObjectID(entity: predicateEntity(entity), store: predicateStore, primaryKey: pk)
}
