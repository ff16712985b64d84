import Foundation

/// One stereotype of an element of an Xcode 3 model: a named group of Core Data
/// settings, such as `XD_PAtt_Stereotype`, which holds an attribute's type,
/// default, limits and value transformer.
///
/// Xcode 3's model editor was built on a UML framework. An entity is a UML
/// class (`XDPMEntity`), a property is a UML property (`XDPMAttribute`,
/// `XDPMRelationship`), and what Core Data needs beyond UML is attached as
/// stereotypes. Each stereotype is an `XDUMLStereotypeImp` whose owned
/// attributes are `XDUMLPropertyImp`s, one per setting, named for the
/// setting and holding the value as their `_default`:
///
/// ```
/// XDPMAttribute "name"
///   XDBucketForStereotypesstorage: {
///     XD_PPropStereotype: XDUMLStereotypeImp
///       XDBucketForOwnedAttributesstorage: {
///         XD_PPSK_isOptional: XDUMLPropertyImp   _default: true
///         XD_PPSK_userInfo:   XDUMLPropertyImp   _default: {…}
///     XD_PAtt_Stereotype: XDUMLStereotypeImp
///       XDBucketForOwnedAttributesstorage: {
///         XD_PAttK_attributeType: XDUMLPropertyImp   _default: 700
/// ```
///
/// A setting whose value is `$null` reads as nil, as does a setting the
/// stereotype does not list: Xcode 3 left out settings that a model never
/// changed (the Recipes model has no `XD_PRK_isToMany` on its to-one
/// relationships).
struct LegacyModelStereotype {
    /// The stereotype's name (`XD_PStereotype`, `XD_PPropStereotype`, …).
    let name: String
    /// The stereotype object, whose path warnings name.
    let object: ArchivedObject
    /// The setting objects (`XDUMLPropertyImp`) by setting name.
    private let settings: [String: ArchivedObject]

    /// The names of the settings the stereotype lists, sorted, so a reader can
    /// warn about the ones it does not know.
    var settingNames: [String] { settings.keys.sorted() }

    /// The value of a setting; nil when the stereotype does not list it or it is `$null`.
    func value(_ setting: String) throws(KeyedArchiveError) -> ArchivedObject? {
        try settings[setting]?.object("_default")
    }

    /// A string setting.
    func string(_ setting: String) throws(KeyedArchiveError) -> String? {
        try settings[setting]?.string("_default")
    }

    /// A boolean setting (a boolean, or the integers 0 and 1).
    func bool(_ setting: String) throws(KeyedArchiveError) -> Bool? {
        try settings[setting]?.bool("_default")
    }

    /// An integer setting.
    func integer(_ setting: String) throws(KeyedArchiveError) -> Int64? {
        try settings[setting]?.integer("_default")
    }

    // MARK: - Reading an element's stereotypes

    /// The stereotypes of a model element by name, from its `XDBucketForStereotypesstorage`.
    ///
    /// - Throws: ``KeyedArchiveError`` when the bucket is not a dictionary, a
    ///   stereotype is not an `XDUMLStereotypeImp` or a setting not an
    ///   `XDUMLPropertyImp`, or a name is not a string.
    static func stereotypes(of element: ArchivedObject) throws(KeyedArchiveError) -> [String: LegacyModelStereotype] {
        var result: [String: LegacyModelStereotype] = [:]
        for (key, stereotype) in try element.entries("XDBucketForStereotypesstorage") ?? [] {
            guard stereotype.isKind(of: "XDUMLStereotypeImp") else { throw stereotype.wrongType("a stereotype (XDUMLStereotypeImp)") }
            let name = try Self.name(of: stereotype, listedAs: key)
            var settings: [String: ArchivedObject] = [:]
            for (settingKey, setting) in try stereotype.entries("XDBucketForOwnedAttributesstorage") ?? [] {
                guard setting.isKind(of: "XDUMLPropertyImp") else { throw setting.wrongType("a stereotype setting (XDUMLPropertyImp)") }
                settings[try Self.name(of: setting, listedAs: settingKey)] = setting
            }
            result[name] = LegacyModelStereotype(name: name, object: stereotype, settings: settings)
        }
        return result
    }

    /// An element's `_name`, or the key its dictionary lists it under.
    private static func name(of element: ArchivedObject, listedAs key: ArchivedObject) throws(KeyedArchiveError) -> String {
        if let name = try element.string("_name") { return name }
        return try key.asString()
    }
}
