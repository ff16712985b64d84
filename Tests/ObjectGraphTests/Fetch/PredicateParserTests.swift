import Foundation
import Testing
@_spi(StoreImplementation) @testable import ObjectGraph
@_spi(StoreImplementation) @testable import DataStackStorage
@_spi(StoreImplementation) @testable import DataStackStores

private func parse(_ format: String, _ arguments: Any?...) throws -> PredicateNode {
    try FetchPredicate(format: format, argumentArray: arguments).expression
}

private func compare(_ lhs: PredicateNode, _ op: ComparisonOperator, _ rhs: PredicateNode,
                     _ options: ComparisonOptions = [], _ modifier: ComparisonModifier = .direct) -> PredicateNode {
    .comparison(lhs: lhs, op: op, rhs: rhs, options: options, modifier: modifier)
}

private func key(_ path: String) -> PredicateNode {
    .keyPath(path.split(separator: ".").map(String.init))
}

private func int(_ value: Int64) -> PredicateNode { .constant(.integer(value)) }
private func str(_ value: String) -> PredicateNode { .constant(.string(value)) }

private func parseError(_ format: String, _ arguments: Any?...) -> FetchPredicateError? {
    do {
        _ = try FetchPredicate(format: format, argumentArray: arguments)
        return nil
    } catch let error as FetchPredicateError {
        return error
    } catch {
        Issue.record("unexpected error \(error)")
        return nil
    }
}

@Suite struct PredicateParserTests {
    // MARK: Comparisons

    @Test func everySpellingOfTheComparisonOperatorsParses() throws {
        let spellings: [(String, ComparisonOperator)] = [
            ("=", .equal), ("==", .equal), ("!=", .notEqual), ("<>", .notEqual), ("<", .less), ("<=", .lessOrEqual),
            ("=<", .lessOrEqual), (">", .greater), (">=", .greaterOrEqual), ("=>", .greaterOrEqual),
        ]
        for (spelling, op) in spellings {
            #expect(try parse("price \(spelling) 5") == compare(key("price"), op, int(5)), "\(spelling)")
            #expect(try parse("price\(spelling)5") == compare(key("price"), op, int(5)), "\(spelling) without spaces")
        }
    }

    @Test func stringOperatorsTakeCaseAndDiacriticModifiers() throws {
        let operators: [(String, ComparisonOperator)] = [
            ("BEGINSWITH", .beginsWith), ("ENDSWITH", .endsWith), ("CONTAINS", .contains), ("LIKE", .like), ("MATCHES", .matches),
        ]
        let modifiers: [(String, ComparisonOptions)] = [
            ("", []), ("[c]", .caseInsensitive), ("[d]", .diacriticInsensitive),
            ("[cd]", [.caseInsensitive, .diacriticInsensitive]), ("[dc]", [.caseInsensitive, .diacriticInsensitive]),
            ("[CD]", [.caseInsensitive, .diacriticInsensitive]),
        ]
        for (word, op) in operators {
            for (modifier, options) in modifiers {
                #expect(try parse("name \(word)\(modifier) 'a'") == compare(key("name"), op, str("a"), options))
                #expect(try parse("name \(word.lowercased())\(modifier) 'a'") == compare(key("name"), op, str("a"), options))
            }
        }
        #expect(try parse("name ==[c] 'a'") == compare(key("name"), .equal, str("a"), .caseInsensitive))
    }

    @Test func inTakesLiteralCollectionsArgumentsAndKeyPaths() throws {
        #expect(try parse("volume IN {1, 2, 3}") == compare(key("volume"), .in, .collection([int(1), int(2), int(3)])))
        #expect(try parse("volume IN {}") == compare(key("volume"), .in, .collection([])))
        #expect(try parse("name IN %@", ["a", "b"]) == compare(key("name"), .in, .collection([str("a"), str("b")])))
        #expect(try parse("volume IN %@", Set([2, 1])) == compare(key("volume"), .in, .collection([int(1), int(2)])))
        #expect(try parse("'x' IN tags.name") == compare(str("x"), .in, key("tags.name")))
        #expect(try parse("name IN[c] {'a'}") == compare(key("name"), .in, .collection([str("a")]), .caseInsensitive))
    }

    @Test func betweenTakesTwoBounds() throws {
        #expect(try parse("price BETWEEN {1, 5}") == compare(key("price"), .between, .collection([int(1), int(5)])))
        #expect(try parse("price BETWEEN %@", [1.5, 2.5]) == compare(key("price"), .between, .collection([.constant(.double(1.5)), .constant(.double(2.5))])))
        #expect(parseError("price BETWEEN {1}")?.offset == 14)
        #expect(parseError("price BETWEEN 5")?.expected == "{low, high} after BETWEEN")
    }

    // MARK: Logic and precedence

    @Test func notBindsTighterThanAndWhichBindsTighterThanOr() throws {
        let a = compare(key("a"), .equal, int(1)), b = compare(key("b"), .equal, int(2)), c = compare(key("c"), .equal, int(3))
        #expect(try parse("a == 1 OR b == 2 AND c == 3") == .or([a, .and([b, c])]))
        #expect(try parse("a == 1 AND b == 2 OR c == 3") == .or([.and([a, b]), c]))
        #expect(try parse("NOT a == 1 AND b == 2") == .and([.not(a), b]))
        #expect(try parse("(a == 1 OR b == 2) AND c == 3") == .and([.or([a, b]), c]))
        #expect(try parse("a == 1 && b == 2 || ! c == 3") == .or([.and([a, b]), .not(c)]))
        #expect(try parse("a == 1 and b == 2 or not c == 3") == .or([.and([a, b]), .not(c)]))
        #expect(try parse("a == 1 AND (b == 2 AND c == 3)") == .and([a, b, c]))
        #expect(try parse("NOT NOT a == 1") == .not(.not(a)))
        #expect(try parse("((a == 1))") == a)
    }

    @Test func literalsParse() throws {
        #expect(try parse("TRUEPREDICATE") == .truePredicate)
        #expect(try parse("falsepredicate") == .falsePredicate)
        for (word, value) in [("TRUE", true), ("yes", true), ("False", false), ("NO", false)] {
            #expect(try parse("active == \(word)") == compare(key("active"), .equal, .constant(.bool(value))))
        }
        for word in ["nil", "NULL", "NIL", "null"] {
            #expect(try parse("name == \(word)") == compare(key("name"), .equal, .constant(.null)))
        }
        #expect(try parse("SELF == %@", 5) == compare(.keyPath([]), .equal, int(5)))
        #expect(try parse("self.name == 'a'") == compare(key("name"), .equal, str("a")))
    }

    @Test func numbersParseInEveryNotation() throws {
        let cases: [(String, PropertyValue)] = [
            ("12", .integer(12)), ("-12", .integer(-12)), ("1.5", .double(1.5)), ("-1.5", .double(-1.5)),
            ("1e3", .double(1000)), ("1.5E-2", .double(0.015)), ("2e+2", .double(200)), ("0x1F", .integer(31)),
            ("0X1f", .integer(31)), ("0o17", .integer(15)), ("0b101", .integer(5)), ("-0x10", .integer(-16)),
            ("9223372036854775807", .integer(.max)), ("-9223372036854775808", .integer(.min)),
            ("9223372036854775808", .double(9223372036854775808)),
        ]
        for (text, value) in cases {
            #expect(try parse("x == \(text)") == compare(key("x"), .equal, .constant(value)), "\(text)")
        }
        #expect(parseError("x == 0x")?.offset == 7)
        #expect(parseError("x == 12abc")?.offset == 7)
        #expect(parseError("x == 1e")?.offset == 7)
        #expect(parseError("x == 0xFFFFFFFFFFFFFFFFFF")?.code == .invalidPredicate)
    }

    @Test func stringsTakeEitherQuoteAndEscapes() throws {
        #expect(parseError("name == 'it''s'")?.offset == 12)   // not SQL quoting
        #expect(try parse(#"name == 'it\'s'"#) == compare(key("name"), .equal, str("it's")))
        #expect(try parse(#"name == "say \"hi\"""#) == compare(key("name"), .equal, str("say \"hi\"")))
        #expect(try parse(#"name == "a\nb\tc\\d""#) == compare(key("name"), .equal, str("a\nb\tc\\d")))
        #expect(try parse(#"name == "\u00e9\u{1F600}""#) == compare(key("name"), .equal, str("é😀")))
        #expect(try parse(#"name MATCHES '\d+'"#) == compare(key("name"), .matches, str(#"\d+"#)))
        #expect(try parse("name == \"%@\"") == compare(key("name"), .equal, str("%@")))   // quoted: no substitution
        #expect(try parse("name == 'é'") == compare(key("name"), .equal, str("é")))
    }

    // MARK: Key paths

    @Test func keyPathsGoThroughRelationshipsAndCollectionOperators() throws {
        #expect(try parse("company.name == 'a'") == compare(key("company.name"), .equal, str("a")))
        #expect(try parse("updates.@count > 3") == compare(.aggregate(.count, collection: key("updates"), keyPath: []), .greater, int(3)))
        #expect(try parse("updates.@max.price > 10") == compare(.aggregate(.max, collection: key("updates"), keyPath: ["price"]), .greater, int(10)))
        #expect(try parse("company.updates.@avg.company.price < 1") ==
                compare(.aggregate(.avg, collection: key("company.updates"), keyPath: ["company", "price"]), .less, int(1)))
        for function in AggregateFunction.allCases where function != .count {
            #expect(try parse("updates.@\(function.rawValue).price == 1") ==
                    compare(.aggregate(function, collection: key("updates"), keyPath: ["price"]), .equal, int(1)))
        }
        #expect(try parse("#in == 1 AND #SELF.#and == 2") ==
                .and([compare(key("in"), .equal, int(1)), compare(key("SELF.and"), .equal, int(2))]))
        #expect(try parse("%K == 1", "company.name") == compare(key("company.name"), .equal, int(1)))
        #expect(try parse("%K.name == 1", "company") == compare(key("company.name"), .equal, int(1)))
    }

    @Test func quantifiersApplyToTheLeftSide() throws {
        for (word, modifier) in [("ANY", ComparisonModifier.any), ("some", .any), ("ALL", .all), ("none", .none)] {
            #expect(try parse("\(word) updates.price > 5") == compare(key("updates.price"), .greater, int(5), [], modifier))
        }
    }

    @Test func subqueriesBindTheirVariable() throws {
        let expected = compare(
            .aggregate(.count, collection: .subquery(
                collection: key("updates"), variable: "u",
                predicate: .and([compare(.variable("u", ["price"]), .greater, int(10)),
                                 compare(.variable("u", ["note"]), .contains, str("x"))])), keyPath: []),
            .greater, int(2))
        #expect(try parse("SUBQUERY(updates, $u, $u.price > 10 AND $u.note CONTAINS 'x').@count > 2") == expected)
        #expect(try parse("subquery(updates, $u, $u.price > 10 && $u.note contains \"x\").@count > 2") == expected)
    }

    // MARK: Arguments

    @Test func formatArgumentsBecomeConstants() throws {
        let id = UUID()
        let url = URL(string: "https://example.com/a?b=c")!
        let date = Date(timeIntervalSinceReferenceDate: 12345.5)
        let objectID = ObjectID(entity: predicateEntity("Company"), store: predicateStore, primaryKey: 7)
        let arguments: [(Any?, PropertyValue)] = [
            ("text", .string("text")), (Int(5), .integer(5)), (Int8(-5), .integer(-5)), (UInt16(5), .integer(5)),
            (Int64.max, .integer(.max)), (UInt(7), .integer(7)), (2.5, .double(2.5)), (Float(0.5), .double(0.5)),
            (true, .bool(true)), (date, .date(date)), (Data([1, 2]), .data(Data([1, 2]))), (id, .uuid(id)),
            (url, .uri(url)), (Decimal(string: "1.25")!, .decimal(Decimal(string: "1.25")!)), (objectID, .object(objectID)),
            (nil, .null), (NSNull(), .null), (Optional<String>.none as Any, .null), (Optional("x") as Any, .string("x")),
            (PropertyValue.integer(3), .integer(3)),
        ]
        for (argument, value) in arguments {
            #expect(try parse("x == %@", argument) == compare(key("x"), .equal, .constant(value)), "\(String(describing: argument))")
        }
        #expect(try parse("x == %d AND y == %i AND z == %ld AND w == %lld", 1, Int32(2), Int64(3), UInt8(4)) == .and([
            compare(key("x"), .equal, int(1)), compare(key("y"), .equal, int(2)),
            compare(key("z"), .equal, int(3)), compare(key("w"), .equal, int(4)),
        ]))
        #expect(try parse("x == %f AND y == %lf", 1.5, 2) == .and([
            compare(key("x"), .equal, .constant(.double(1.5))), compare(key("y"), .equal, .constant(.double(2))),
        ]))
        let mixed: [Any?] = [1, nil, "a"]
        #expect(try FetchPredicate(format: "x IN %@", argumentArray: [mixed]).expression ==
                compare(key("x"), .in, .collection([int(1), .constant(.null), str("a")])))
    }

    @Test func argumentsAreConvertedWhenThePredicateIsCreated() throws {
        final class Box: PredicateArgumentConvertible {
            var value: Int64 = 1
            var predicateArgument: PropertyValue { .integer(value) }
        }
        let box = Box()
        let predicate = try FetchPredicate(format: "x == %@", box)
        box.value = 2
        #expect(predicate.expression == compare(key("x"), .equal, int(1)))
    }

    @Test func variadicAndArrayInitializersAgree() throws {
        #expect(try FetchPredicate(format: "a == %@ AND b == %K", 1, "c") ==
                FetchPredicate(format: "a == %@ AND b == %K", argumentArray: [1, "c"]))
        #expect(try FetchPredicate(format: "a == 1") == FetchPredicate(format: "a   =   1"))
    }

    // MARK: Substitution variables

    @Test func substitutionVariablesAreReplaced() throws {
        let template = try FetchPredicate(format: "company == $company AND price BETWEEN {$low, $high} AND name IN $names")
        let objectID = ObjectID(entity: predicateEntity("Company"), store: predicateStore, primaryKey: 3)
        let filled = try template.withSubstitutionVariables(["company": objectID, "low": 1, "high": 2.5, "names": ["a", "b"]])
        #expect(filled == (try FetchPredicate(format: "company == %@ AND price BETWEEN {1, 2.5} AND name IN {'a', 'b'}", objectID)))
        let partial = try template.withSubstitutionVariables(["low": 1])
        #expect(partial.description == "company == $company AND price BETWEEN {1, $high} AND name IN $names")
    }

    @Test func substitutionLeavesSubqueryVariablesAlone() throws {
        let template = try FetchPredicate(format: "SUBQUERY(updates, $u, $u.price > $limit).@count > 0")
        let filled = try template.withSubstitutionVariables(["u": 99, "limit": 5])
        #expect(filled.description == "SUBQUERY(updates, $u, $u.price > 5).@count > 0")
    }

    @Test func substitutionRejectsUnsupportedValues() throws {
        let template = try FetchPredicate(format: "price > $limit")
        #expect(throws: FetchPredicateError.self) { try template.withSubstitutionVariables(["limit": [1: 2]]) }
        do {
            _ = try template.withSubstitutionVariables(["limit": NSObject()])
            Issue.record("expected an error")
        } catch let error as FetchPredicateError {
            #expect(error.offset == 8)
            #expect(error.message.contains("unsupported argument type NSObject for $limit") == true)
        }
    }

    // MARK: Errors

    @Test func syntaxErrorsGiveTheOffsetAndWhatWasExpected() {
        let cases: [(String, Int, String)] = [
            ("price > AND x", 8, "a value"),
            ("price >", 7, "a value"),
            ("", 0, "a predicate"),
            ("price", 5, "a comparison operator (==, !=, <, <=, >, >=, BEGINSWITH, ENDSWITH, CONTAINS, LIKE, MATCHES, IN, BETWEEN)"),
            ("price > 5 volume < 2", 10, "AND, OR or the end of the predicate"),
            ("(price > 5", 10, "')' or AND, OR"),
            ("price > 5)", 9, "AND, OR or the end of the predicate"),
            ("name == 'abc", 8, "a closing ' for the string starting here"),
            ("name == \"abc", 8, "a closing \" for the string starting here"),
            ("volume IN {1, 2", 15, "',' or '}'"),
            ("name BEGINSWITH[x] 'a'", 16, "c, d or cd inside [ ]"),
            ("name BEGINSWITH[c 'a'", 18, "']'"),
            ("price > 5 AND", 13, "a predicate"),
            ("AND == 1", 0, "a predicate"),
            ("company. == 1", 9, "a key or a collection operator after '.'"),
            ("updates.@max > 1", 13, "'.' and a key path after @max"),
            ("price == %z", 9, "a format specifier (%@, %K, %d, %f)"),
            ("price ^ 2", 6, "a key, a value or an operator, not '^'"),
            ("ANY == 1", 4, "a key path after ANY"),
            ("SUBQUERY(updates, u, TRUEPREDICATE).@count > 1", 18, "a $variable naming each element"),
            ("SUBQUERY(updates, $u, TRUEPREDICATE > 1", 36, "')' closing SUBQUERY"),
            ("x == $", 6, "a variable name after '$'"),
            ("#1 == 2", 1, "a key after '#'"),
            ("x == CAST(1, 'NSFoo')", 13, "a type name \"NSDate\", \"NSUUID\", \"NSURL\", \"NSData\", \"NSDecimalNumber\" or \"NSNumber\""),
            ("x == -y", 6, "a number after '-'"),
            ("日本 == 'x' AND", 13, "a predicate"),
        ]
        for (format, offset, expected) in cases {
            guard let error = parseError(format) else {
                Issue.record("'\(format)' parsed")
                continue
            }
            #expect(error.offset == offset, "\(format): \(error)")
            #expect(error.expected == expected, "\(format): \(error)")
            #expect(error.code == .syntaxError)
            #expect(error.format == format)
        }
    }

    @Test func errorDescriptionNamesOffsetFormatAndExpectation() {
        let error = parseError("price > AND x")
        #expect(error?.description == "bad predicate at offset 8 in 'price > AND x': expected a value")
        let semantic = FetchPredicateError(format: "prize > 5", message: "entity Ticker has no property 'prize'")
        #expect(semantic.description == "bad predicate 'prize > 5': entity Ticker has no property 'prize'")
    }

    @Test func argumentErrorsGiveTheOffsetAndTheReason() {
        #expect(parseError("a == %@ AND b == %@", 1)?.offset == 17)
        #expect(parseError("a == %@ AND b == %@", 1)?.message == "%@ has no argument (1 given)")
        #expect(parseError("a == %@", NSObject())?.message == "unsupported argument type NSObject for %@")
        #expect(parseError("a == %@", [NSObject()])?.message == "unsupported argument type NSObject for %@")
        #expect(parseError("%K == 1", 5)?.message == "unsupported argument type Int for %K; it takes a key path string")
        #expect(parseError("%K == 1", "a..b")?.offset == 0)
        #expect(parseError("a == %d", "x")?.message == "unsupported argument type String for %d; it takes an integer")
        #expect(parseError("a == %f", "x")?.message == "unsupported argument type String for %f; it takes a number")
        #expect(parseError("a MATCHES '('")?.message == "the regular expression '(' does not compile")
        #expect(parseError("a == CAST('x', 'NSUUID')")?.message == "the value can't be cast to NSUUID")
        #expect(parseError("a == 1", 2) == nil)   // extra arguments are ignored, as NSPredicate does
    }

    @Test func offsetsCountCharactersNotBytes() {
        #expect(parseError("name == 'é' AND AND")?.offset == 16)
        #expect(parseError("name == 'e\u{301}' AND AND")?.offset == 16)
        #expect(parseError("名前 == 'x' ^")?.offset == 10)
    }

    // MARK: Printing

    @Test func descriptionIsCanonicalAndParsesBack() throws {
        let id = UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!
        let cases: [(String, [Any?], String)] = [
            ("price>5 and name beginswith[c] 'a'", [], #"price > 5 AND name BEGINSWITH[c] "a""#),
            ("a == 1 OR (b == 2 AND c == 3)", [], "a == 1 OR b == 2 AND c == 3"),
            ("(a == 1 OR b == 2) AND c == 3", [], "(a == 1 OR b == 2) AND c == 3"),
            ("NOT (a == 1 OR b == 2)", [], "NOT (a == 1 OR b == 2)"),
            ("some updates.price =< 2", [], "ANY updates.price <= 2"),
            ("x == %@ AND y == %@ AND z == %@", [Date(timeIntervalSinceReferenceDate: 10), id, URL(string: "https://a.b/c")!],
             #"x == CAST(10.0, "NSDate") AND y == CAST("E621E1F8-C36C-495A-93FC-0C247A3E6E5F", "NSUUID") AND z == CAST("https://a.b/c", "NSURL")"#),
            ("x == %@ AND y == %@", [Data([0, 255]), Decimal(string: "1.25")!], #"x == CAST("AP8=", "NSData") AND y == CAST("1.25", "NSDecimalNumber")"#),
            ("#in == nil", [], "#in == nil"),
            ("name == 'a\"b\\\\c'", [], #"name == "a\"b\\c""#),
            ("updates.@sum.price between {1, 2.5}", [], "updates.@sum.price BETWEEN {1, 2.5}"),
        ]
        for (format, arguments, canonical) in cases {
            let predicate = try FetchPredicate(format: format, argumentArray: arguments)
            #expect(predicate.description == canonical)
            #expect(try FetchPredicate(format: predicate.description) == predicate, "\(canonical)")
        }
    }

    // MARK: Shape

    @Test func shapeIgnoresConstantValuesButNotTheirKinds() throws {
        let a = try FetchPredicate(format: "price > %@ AND name IN %@", 5, ["a", "b"])
        let b = try FetchPredicate(format: "price > %@ AND name IN %@", 9, ["c", "d"])
        let c = try FetchPredicate(format: "price > %@ AND name IN %@", 9, ["c"])
        let d = try FetchPredicate(format: "price > %@ AND name IN %@", "9", ["c", "d"])
        let e = try FetchPredicate(format: "price > %@ AND name IN %@", nil, ["c", "d"])
        #expect(a.shape == b.shape)
        #expect(a != b)
        #expect(a.shape != c.shape)
        #expect(a.shape != d.shape)
        #expect(a.shape != e.shape)
        #expect(a.sqlBindings == [.integer(5), .string("a"), .string("b")])
    }

    // MARK: Robustness

    @Test func randomAndMutatedFormatsNeverCrash() throws {
        var random = SplitMix64(seed: 0xF022)
        let seeds = [
            "price > 5 AND name BEGINSWITH[cd] 'a' OR NOT (volume IN {1, 2, 3})",
            "ANY updates.price BETWEEN {1, 2} AND updates.@max.price > %@",
            "SUBQUERY(updates, $u, $u.price > $x AND $u.note LIKE[c] '*a?').@count > 0",
            "%K == %@ AND SELF != nil AND #in == TRUEPREDICATE",
            "x == CAST(1.5, \"NSDate\") AND y == 0x1F AND z == -1e-3 AND w MATCHES '\\\\d+'",
        ]
        let alphabet = Array("abcxyz019 .,'\"\\$%@#()[]{}<>=!&|*?-+^@KdfcdTRUEFALSEANDORNOTINANYALLSUBQUERYCAST日é\u{301}\n")
        for round in 0..<4000 {
            var characters = Array(seeds[round % seeds.count])
            let mutations = Int.random(in: 1...6, using: &random)
            for _ in 0..<mutations {
                let position = Int.random(in: 0...characters.count, using: &random)
                switch Int.random(in: 0..<3, using: &random) {
                case 0: characters.insert(alphabet.randomElement(using: &random)!, at: position)
                case 1 where position < characters.count: characters.remove(at: position)
                default:
                    if position < characters.count { characters[position] = alphabet.randomElement(using: &random)! }
                }
            }
            if round % 5 == 0 {
                characters = (0..<Int.random(in: 0..<40, using: &random)).map { _ in alphabet.randomElement(using: &random)! }
            }
            let format = String(characters)
            let arguments: [Any?] = [1, "updates", nil, ["a", 2], 2.5, Date(), NSObject()]
            do {
                let predicate = try FetchPredicate(format: format, argumentArray: Array(arguments.prefix(Int.random(in: 0...7, using: &random))))
                // Whatever parses prints, reparses, and evaluates or throws cleanly.
                _ = try? FetchPredicate(format: predicate.description)
                _ = predicate.shape
                _ = try? predicate.validate(for: predicateEntity("Company"))
                _ = try? predicate.evaluate(with: samplePredicateData().subject("Company", 1))
                _ = try? predicate.sql(for: predicateEntity("Company"), schema: PredicateTestSchema(), rootAlias: "t0")
            } catch let error as FetchPredicateError {
                #expect(error.offset >= -1 && error.offset <= format.count, "\(format): \(error)")
                #expect(error.format == format)
            }
        }
    }
}
