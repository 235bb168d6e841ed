//! The C expressions a `print fmt` passes to its format string, parsed into
//! a typed tree.
//!
//! A tracepoint's print fmt is its `TP_printk()` arguments stringified after
//! macro expansion (include/trace/stages/stage7_class_define.h): `REC->field`
//! (`__entry->field`), integer arithmetic, comparisons, `?:`, casts, `sizeof`
//! and the print helpers of include/trace/stages/stage3_trace_output.h
//! (`__print_flags`, `__print_symbolic` and their `_u64` forms,
//! `__print_hex`, `__print_hex_str`, `__print_array`,
//! `__print_dynamic_array`, `__get_str`, `__get_rel_str`,
//! `__get_dynamic_array`, `__get_dynamic_array_len`, `__get_bitmask`,
//! `__get_cpumask`, `__get_sockaddr`, `__print_ns_to_secs`, ...). This
//! module only parses and types them; [`super::eval`] evaluates a tree
//! against a record. What it does not know (other functions, statement
//! expressions, enum names the kernel left unexported) is an error, kept by
//! the caller as [`super::Arg::Unsupported`], never guessed at.

use super::ctype::{CType, IntTy};
use super::ctype::{IGNORED, STRUCTS, TYPEDEFS};
use super::lex::{Tok, lex};
use crate::format::{Field, FieldKind};

/// A unary operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unary {
    /// `-x`.
    Neg,
    /// `+x`.
    Plus,
    /// `!x`.
    Not,
    /// `~x`.
    BitNot,
    /// `*p`.
    Deref,
}

/// A binary operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binary {
    /// `*`.
    Mul,
    /// `/`.
    Div,
    /// `%`.
    Rem,
    /// `+`.
    Add,
    /// `-`.
    Sub,
    /// `<<`.
    Shl,
    /// `>>`.
    Shr,
    /// `<`.
    Lt,
    /// `>`.
    Gt,
    /// `<=`.
    Le,
    /// `>=`.
    Ge,
    /// `==`.
    Eq,
    /// `!=`.
    Ne,
    /// `&`.
    BitAnd,
    /// `^`.
    BitXor,
    /// `|`.
    BitOr,
    /// `&&`.
    And,
    /// `||`.
    Or,
}

/// A `{ value, "name" }` table of `__print_flags` / `__print_symbolic`.
pub type Table = Vec<(u64, Vec<u8>)>;

/// A print helper of stage3_trace_output.h.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Helper {
    /// `__print_flags(value, delim, {mask, "name"}...)` (`wide`:
    /// `__print_flags_u64`).
    Flags {
        /// The flags.
        value: Box<Expr>,
        /// The delimiter.
        delim: Vec<u8>,
        /// Masks and names, in order.
        table: Table,
        /// The `_u64` form (matters on 32-bit kernels).
        wide: bool,
    },
    /// `__print_symbolic(value, {value, "name"}...)` (`wide`:
    /// `__print_symbolic_u64`).
    Symbolic {
        /// The value.
        value: Box<Expr>,
        /// Values and names, in order.
        table: Table,
        /// The `_u64` form.
        wide: bool,
    },
    /// `__print_hex(buf, len)` (`concat` false) or `__print_hex_str`.
    Hex {
        /// The bytes.
        buf: Box<Expr>,
        /// How many.
        len: Box<Expr>,
        /// No spaces between the bytes.
        concat: bool,
    },
    /// `__print_array(array, count, el_size)`.
    Array {
        /// The elements.
        buf: Box<Expr>,
        /// How many.
        count: Box<Expr>,
        /// Bytes per element.
        el_size: Box<Expr>,
    },
    /// `__get_dynamic_array(field)`, `__get_str(field)`,
    /// `__get_sockaddr(field)` and their `_rel_` forms: a pointer to the
    /// field's data (element `elem` of a `__data_loc char[][N]`).
    DynArray {
        /// The `__data_loc`/`__rel_loc` field.
        field: usize,
        /// Element of a string array.
        elem: usize,
    },
    /// `__get_dynamic_array_len(field)` (and the `_rel_` form).
    DynLen {
        /// The field.
        field: usize,
    },
    /// `__get_bitmask(field)` / `__get_cpumask(field)` (and `_rel_`).
    Bitmask {
        /// The field.
        field: usize,
    },
    /// `__print_ns_to_secs(value)`.
    NsToSecs(Box<Expr>),
    /// `__print_ns_without_secs(value)`.
    NsWithoutSecs(Box<Expr>),
    /// `__event_in_hardirq()` and friends: `common_flags & mask`.
    InIrq(u8),
}

/// A typed expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    /// An integer constant.
    Num(u64, IntTy),
    /// A string literal.
    Str(Vec<u8>),
    /// `REC->field`.
    Field(usize),
    /// `a[i]`.
    Index(Box<Expr>, Box<Expr>),
    /// A unary operation.
    Unary(Unary, Box<Expr>),
    /// A binary operation.
    Binary(Binary, Box<Expr>, Box<Expr>),
    /// `c ? a : b`.
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
    /// `(type)x`.
    Cast(CType, Box<Expr>),
    /// A print helper.
    Helper(Helper),
}

/// Parses one argument expression of a print fmt; `names` gives the
/// values of names the kernel left unexpanded (enum constants).
pub fn parse(
    text: &str,
    fields: &[Field],
    long_size: usize,
    names: Option<&super::Names>,
) -> Result<Expr, String> {
    let toks = lex(text, long_size)?;
    let mut p = Parser {
        toks,
        at: 0,
        fields,
        long_size,
        names,
    };
    let e = p.cond()?;
    match p.peek() {
        None => Ok(e),
        Some(t) => Err(format!("unexpected {} in {text:?}", t.show())),
    }
}

struct Parser<'a> {
    toks: Vec<Tok>,
    at: usize,
    fields: &'a [Field],
    long_size: usize,
    names: Option<&'a super::Names>,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at)
    }

    fn peek_at(&self, n: usize) -> Option<&Tok> {
        self.toks.get(self.at + n)
    }

    fn is(&self, p: &str) -> bool {
        matches!(self.peek(), Some(Tok::P(q)) if *q == p)
    }

    fn eat(&mut self, p: &str) -> bool {
        if self.is(p) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, p: &str) -> Result<(), String> {
        if self.eat(p) {
            Ok(())
        } else {
            Err(match self.peek() {
                Some(t) => format!("expected '{p}', found {}", t.show()),
                None => format!("expected '{p}' at the end"),
            })
        }
    }

    fn ident(&mut self) -> Result<String, String> {
        match self.toks.get(self.at) {
            Some(Tok::Ident(s)) => {
                self.at += 1;
                Ok(s.clone())
            }
            Some(t) => Err(format!("expected a name, found {}", t.show())),
            None => Err("expected a name at the end".into()),
        }
    }

    fn cond(&mut self) -> Result<Expr, String> {
        let c = self.binary(0)?;
        if !self.eat("?") {
            return Ok(c);
        }
        // GNU `a ?: b` is not used by print fmts
        let a = self.cond()?;
        self.expect(":")?;
        let b = self.cond()?;
        Ok(Expr::Cond(Box::new(c), Box::new(a), Box::new(b)))
    }

    fn binop(&self) -> Option<(Binary, u8)> {
        let Some(Tok::P(p)) = self.peek() else {
            return None;
        };
        Some(match *p {
            "||" => (Binary::Or, 1),
            "&&" => (Binary::And, 2),
            "|" => (Binary::BitOr, 3),
            "^" => (Binary::BitXor, 4),
            "&" => (Binary::BitAnd, 5),
            "==" => (Binary::Eq, 6),
            "!=" => (Binary::Ne, 6),
            "<" => (Binary::Lt, 7),
            ">" => (Binary::Gt, 7),
            "<=" => (Binary::Le, 7),
            ">=" => (Binary::Ge, 7),
            "<<" => (Binary::Shl, 8),
            ">>" => (Binary::Shr, 8),
            "+" => (Binary::Add, 9),
            "-" => (Binary::Sub, 9),
            "*" => (Binary::Mul, 10),
            "/" => (Binary::Div, 10),
            "%" => (Binary::Rem, 10),
            _ => return None,
        })
    }

    /// Precedence climbing over the binary operators above `min`.
    fn binary(&mut self, min: u8) -> Result<Expr, String> {
        let mut lhs = self.unary()?;
        while let Some((op, prec)) = self.binop() {
            if prec <= min {
                break;
            }
            self.at += 1;
            let rhs = self.binary(prec)?;
            lhs = Expr::Binary(op, Box::new(lhs), Box::new(rhs));
        }
        Ok(lhs)
    }

    fn unary(&mut self) -> Result<Expr, String> {
        let op = match self.peek() {
            Some(Tok::P("-")) => Some(Unary::Neg),
            Some(Tok::P("+")) => Some(Unary::Plus),
            Some(Tok::P("!")) => Some(Unary::Not),
            Some(Tok::P("~")) => Some(Unary::BitNot),
            Some(Tok::P("*")) => Some(Unary::Deref),
            _ => None,
        };
        if let Some(op) = op {
            self.at += 1;
            let e = self.unary()?;
            return Ok(Expr::Unary(op, Box::new(e)));
        }
        if self.is("&") {
            return Err("'&' (address of) is not supported".into());
        }
        if matches!(self.peek(), Some(Tok::Ident(s)) if s == "sizeof") {
            self.at += 1;
            return self.sizeof();
        }
        if self.is("(") {
            let save = self.at;
            self.at += 1;
            if let Some(ty) = self.type_name()?
                && self.eat(")")
            {
                let e = self.unary()?;
                return Ok(Expr::Cast(ty, Box::new(e)));
            }
            self.at = save;
        }
        self.postfix()
    }

    fn sizeof(&mut self) -> Result<Expr, String> {
        let ulong = IntTy::ulong(self.long_size);
        if self.is("(") {
            let save = self.at;
            self.at += 1;
            let struct_name = match (self.peek(), self.peek_at(1), self.peek_at(2)) {
                (Some(Tok::Ident(k)), Some(Tok::Ident(n)), Some(Tok::P(")")))
                    if k == "struct" || k == "union" =>
                {
                    Some(n.clone())
                }
                _ => None,
            };
            if let Some(n) = struct_name {
                self.at += 3;
                let size = STRUCTS
                    .iter()
                    .find(|(s, _)| *s == n)
                    .map(|(_, z)| *z)
                    .ok_or_else(|| format!("sizeof(struct {n}) is not known"))?;
                return Ok(Expr::Num(size, ulong));
            }
            if let Some(ty) = self.type_name()? {
                self.expect(")")?;
                let size = match ty {
                    CType::Int(t) => u64::from(t.bits / 8),
                    CType::Ptr(_) => self.long_size as u64,
                };
                return Ok(Expr::Num(size, ulong));
            }
            self.at = save;
        }
        // sizeof of a field (`sizeof(REC->x)`, `sizeof(REC->x[0])`)
        let e = self.unary()?;
        let size = match &e {
            Expr::Field(i) => self.fields[*i].size as u64,
            Expr::Index(b, _) => match **b {
                Expr::Field(i) => self.fields[i].elem_size as u64,
                _ => return Err("sizeof of an expression is not supported".into()),
            },
            _ => return Err("sizeof of an expression is not supported".into()),
        };
        Ok(Expr::Num(size, ulong))
    }

    /// A type name at the current position (after a `(`), or `None` (and
    /// nothing consumed) when what follows is not one.
    fn type_name(&mut self) -> Result<Option<CType>, String> {
        let start = self.at;
        let mut words: Vec<String> = Vec::new();
        let mut named: Option<CType> = None;
        let mut aggregate = false;
        while let Some(Tok::Ident(w)) = self.peek() {
            let w = w.clone();
            if IGNORED.contains(&w.as_str()) {
                self.at += 1;
                continue;
            }
            match w.as_str() {
                "struct" | "union" => {
                    self.at += 1;
                    self.ident()?;
                    aggregate = true;
                }
                "enum" => {
                    self.at += 1;
                    self.ident()?;
                    named = Some(CType::Int(IntTy::INT));
                }
                "signed" | "unsigned" | "char" | "short" | "int" | "long" | "void" => {
                    self.at += 1;
                    words.push(w);
                }
                _ if words.is_empty() && named.is_none() && !aggregate => {
                    if let Some(&(_, bits, signed)) = TYPEDEFS.iter().find(|t| t.0 == w) {
                        let bits = if bits == 0 {
                            8 * self.long_size as u32
                        } else {
                            bits
                        };
                        named = Some(CType::Int(IntTy::new(bits, signed)));
                        self.at += 1;
                    } else if w.ends_with("_t")
                        && matches!(self.peek_at(1), Some(Tok::P(")" | "*")))
                    {
                        return Err(format!("the size of type {w} is not known"));
                    } else {
                        break;
                    }
                }
                _ => break,
            }
        }
        if words.is_empty() && named.is_none() && !aggregate {
            self.at = start;
            return Ok(None);
        }
        let mut ptr = 0;
        while self.eat("*") {
            ptr += 1;
            while matches!(self.peek(), Some(Tok::Ident(w)) if IGNORED.contains(&w.as_str())) {
                self.at += 1;
            }
        }
        let base: Option<IntTy> = if aggregate {
            None
        } else if let Some(CType::Int(t)) = named {
            Some(t)
        } else {
            self.base_type(&words)?
        };
        Ok(Some(match (ptr, base) {
            (0, Some(t)) => CType::Int(t),
            (0, None) if aggregate => return Err("a cast to a structure".into()),
            (0, None) => return Err("a cast to void".into()),
            (1, elem) => CType::Ptr(elem),
            // a pointer to pointers: elements of the kernel's long
            (_, _) => CType::Ptr(Some(IntTy::ulong(self.long_size))),
        }))
    }

    /// `unsigned long`, `char`, `long long int`, `void` (`None`)...
    fn base_type(&self, words: &[String]) -> Result<Option<IntTy>, String> {
        let has = |w: &str| words.iter().any(|x| x == w);
        let longs = words.iter().filter(|w| *w == "long").count();
        let unsigned = has("unsigned");
        if has("void") {
            return Ok(None);
        }
        let bits = if has("char") {
            8
        } else if has("short") {
            16
        } else if longs >= 2 {
            64
        } else if longs == 1 {
            8 * self.long_size as u32
        } else {
            32
        };
        if has("char") && !unsigned && !has("signed") {
            return Ok(Some(IntTy::CHAR));
        }
        Ok(Some(IntTy::new(bits, !unsigned)))
    }

    fn postfix(&mut self) -> Result<Expr, String> {
        let mut e = self.primary()?;
        while self.eat("[") {
            let i = self.cond()?;
            self.expect("]")?;
            e = Expr::Index(Box::new(e), Box::new(i));
        }
        if self.is("->") || self.is(".") {
            return Err("member access other than REC->field is not supported".into());
        }
        Ok(e)
    }

    fn primary(&mut self) -> Result<Expr, String> {
        match self.toks.get(self.at).cloned() {
            Some(Tok::Num(v, ty)) => {
                self.at += 1;
                Ok(Expr::Num(v, ty))
            }
            Some(Tok::Str(s)) => {
                self.at += 1;
                Ok(Expr::Str(s))
            }
            Some(Tok::P("(")) => {
                self.at += 1;
                // `(REC)->field`
                if matches!(self.peek(), Some(Tok::Ident(r)) if r == "REC")
                    && matches!(self.peek_at(1), Some(Tok::P(")")))
                    && matches!(self.peek_at(2), Some(Tok::P("->")))
                {
                    self.at += 3;
                    let f = self.ident()?;
                    return self.field(&f).map(Expr::Field);
                }
                if self.is("{") {
                    return Err("statement expressions are not supported".into());
                }
                let e = self.cond()?;
                self.expect(")")?;
                Ok(e)
            }
            Some(Tok::Ident(name)) => {
                self.at += 1;
                if name == "REC" {
                    self.expect("->")?;
                    let f = self.ident()?;
                    return self.field(&f).map(Expr::Field);
                }
                if self.eat("(") {
                    return self.call(&name);
                }
                match name.as_str() {
                    "NULL" | "false" => Ok(Expr::Num(0, IntTy::INT)),
                    "true" => Ok(Expr::Num(1, IntTy::INT)),
                    // an enum constant: an int, or wider when it does not fit
                    _ => match self.names.and_then(|n| n.value(&name)) {
                        Some(v) if i32::try_from(v).is_ok() => {
                            Ok(Expr::Num(IntTy::INT.norm(v as u64), IntTy::INT))
                        }
                        Some(v) if u32::try_from(v).is_ok() => Ok(Expr::Num(v as u64, IntTy::UINT)),
                        Some(v) => Ok(Expr::Num(v as u64, IntTy::LLONG)),
                        None => Err(format!("unknown name {name}")),
                    },
                }
            }
            Some(t) => Err(format!("unexpected {}", t.show())),
            None => Err("expression ends early".into()),
        }
    }

    fn field(&self, name: &str) -> Result<usize, String> {
        self.fields
            .iter()
            .position(|f| f.name == name)
            .ok_or_else(|| format!("no field {name}"))
    }

    /// `name` or `name[N]` naming a `__data_loc`/`__rel_loc` field, then `)`.
    fn loc_field(&mut self) -> Result<(usize, usize), String> {
        let name = self.ident()?;
        let mut elem = 0;
        if self.eat("[") {
            match self.toks.get(self.at) {
                Some(&Tok::Num(v, _)) => {
                    self.at += 1;
                    elem = usize::try_from(v).map_err(|_| "element out of range")?;
                }
                _ => return Err("expected an element number".into()),
            }
            self.expect("]")?;
        }
        self.expect(")")?;
        let i = self.field(&name)?;
        let f = &self.fields[i];
        if !matches!(f.kind, FieldKind::DataLoc { .. }) {
            return Err(format!("{name} is not a dynamic (__data_loc) field"));
        }
        if elem >= f.count {
            return Err(format!("{name}[{elem}] is out of range"));
        }
        Ok((i, elem))
    }

    fn args(&mut self) -> Result<Vec<Expr>, String> {
        let mut v = Vec::new();
        if self.eat(")") {
            return Ok(v);
        }
        loop {
            v.push(self.cond()?);
            if self.eat(")") {
                return Ok(v);
            }
            self.expect(",")?;
        }
    }

    fn string(&mut self) -> Result<Vec<u8>, String> {
        match self.toks.get(self.at) {
            Some(Tok::Str(s)) => {
                let s = s.clone();
                self.at += 1;
                Ok(s)
            }
            // `(void *)0` or `NULL` as a delimiter: none
            _ => match self.cond()? {
                Expr::Num(0, _) | Expr::Cast(_, _) => Ok(Vec::new()),
                _ => Err("expected a string".into()),
            },
        }
    }

    /// `, { value, "name" } ...)` of the flag and symbol helpers; values
    /// are constants, taken as `unsigned long` (`unsigned long long` for
    /// the `_u64` forms).
    fn table(&mut self, wide: bool) -> Result<Table, String> {
        let ty = if wide {
            IntTy::ULLONG
        } else {
            IntTy::ulong(self.long_size)
        };
        let mut t = Vec::new();
        while self.eat(",") {
            self.expect("{")?;
            let v = self.cond()?;
            let v = super::eval::constant(&v, self.long_size)
                .ok_or("a table value is not a constant")?;
            self.expect(",")?;
            let name = self.string()?;
            self.expect("}")?;
            t.push((ty.norm(v), name));
        }
        self.expect(")")?;
        Ok(t)
    }

    fn call(&mut self, name: &str) -> Result<Expr, String> {
        let rel = name.contains("_rel_");
        let check_rel = |p: &Parser, i: usize| -> Result<(), String> {
            match p.fields[i].kind {
                FieldKind::DataLoc { relative } if relative == rel => Ok(()),
                _ => Err(format!("{name} of a field of another kind")),
            }
        };
        let h = match name {
            "__print_flags" | "__print_flags_u64" => {
                let value = Box::new(self.cond()?);
                self.expect(",")?;
                let delim = self.string()?;
                let table = self.table(name.ends_with("u64"))?;
                Helper::Flags {
                    value,
                    delim,
                    table,
                    wide: name.ends_with("u64"),
                }
            }
            "__print_symbolic" | "__print_symbolic_u64" => {
                let value = Box::new(self.cond()?);
                let table = self.table(name.ends_with("u64"))?;
                Helper::Symbolic {
                    value,
                    table,
                    wide: name.ends_with("u64"),
                }
            }
            "__print_hex" | "__print_hex_str" | "__print_array" | "__print_dynamic_array" => {
                self.print_buffer(name)?
            }
            "__get_str" | "__get_rel_str" => {
                let (field, elem) = self.loc_field()?;
                check_rel(self, field)?;
                Helper::DynArray { field, elem }
            }
            "__get_dynamic_array"
            | "__get_rel_dynamic_array"
            | "__get_sockaddr"
            | "__get_rel_sockaddr" => {
                let (field, elem) = self.loc_field()?;
                check_rel(self, field)?;
                let e = Expr::Helper(Helper::DynArray { field, elem });
                let elem_ty = if name.contains("sockaddr") {
                    None
                } else {
                    Some(IntTy::UCHAR)
                };
                return Ok(Expr::Cast(CType::Ptr(elem_ty), Box::new(e)));
            }
            "__get_dynamic_array_len" | "__get_rel_dynamic_array_len" => {
                let (field, _) = self.loc_field()?;
                check_rel(self, field)?;
                Helper::DynLen { field }
            }
            "__get_bitmask" | "__get_cpumask" | "__get_rel_bitmask" | "__get_rel_cpumask" => {
                let (field, _) = self.loc_field()?;
                check_rel(self, field)?;
                Helper::Bitmask { field }
            }
            "__print_ns_to_secs" | "__print_ns_without_secs" => {
                let mut a = self.args()?;
                if a.len() != 1 {
                    return Err(format!("{name} takes 1 argument"));
                }
                let v = Box::new(a.pop().unwrap_or(Expr::Num(0, IntTy::INT)));
                if name == "__print_ns_to_secs" {
                    Helper::NsToSecs(v)
                } else {
                    Helper::NsWithoutSecs(v)
                }
            }
            "__event_in_hardirq" | "__event_in_softirq" | "__event_in_irq" => {
                self.expect(")")?;
                Helper::InIrq(match name {
                    "__event_in_hardirq" => 0x08,
                    "__event_in_softirq" => 0x10,
                    _ => 0x18,
                })
            }
            "__builtin_expect" => {
                let mut a = self.args()?;
                if a.len() != 2 {
                    return Err("__builtin_expect takes 2 arguments".into());
                }
                a.truncate(1);
                return Ok(a.pop().unwrap_or(Expr::Num(0, IntTy::INT)));
            }
            _ => return Err(format!("unknown function {name}()")),
        };
        Ok(Expr::Helper(h))
    }

    /// `__print_hex`, `__print_hex_str`, `__print_array` and
    /// `__print_dynamic_array`: a buffer printed element by element.
    fn print_buffer(&mut self, name: &str) -> Result<Helper, String> {
        Ok(match name {
            "__print_hex" | "__print_hex_str" => {
                let mut a = self.args()?;
                if a.len() != 2 {
                    return Err(format!("{name} takes 2 arguments"));
                }
                let len = Box::new(a.pop().unwrap_or(Expr::Num(0, IntTy::INT)));
                let buf = Box::new(a.pop().unwrap_or(Expr::Num(0, IntTy::INT)));
                Helper::Hex {
                    buf,
                    len,
                    concat: name == "__print_hex_str",
                }
            }
            "__print_array" => {
                let mut a = self.args()?;
                if a.len() != 3 {
                    return Err("__print_array takes 3 arguments".into());
                }
                let el_size = Box::new(a.pop().unwrap_or(Expr::Num(0, IntTy::INT)));
                let count = Box::new(a.pop().unwrap_or(Expr::Num(0, IntTy::INT)));
                let buf = Box::new(a.pop().unwrap_or(Expr::Num(0, IntTy::INT)));
                Helper::Array {
                    buf,
                    count,
                    el_size,
                }
            }
            "__print_dynamic_array" => {
                let f = self.ident()?;
                let field = self.field(&f)?;
                self.expect(",")?;
                let el_size = self.cond()?;
                self.expect(")")?;
                let len = Expr::Helper(Helper::DynLen { field });
                Helper::Array {
                    buf: Box::new(Expr::Helper(Helper::DynArray { field, elem: 0 })),
                    count: Box::new(Expr::Binary(
                        Binary::Div,
                        Box::new(len),
                        Box::new(el_size.clone()),
                    )),
                    el_size: Box::new(el_size),
                }
            }
            _ => return Err(format!("unknown function {name}()")),
        })
    }
}

impl Expr {
    /// The static type of the expression (C's, before evaluation), used
    /// to convert the arms of `?:` to one type; `None` when it is not an
    /// integer or pointer the evaluator knows statically.
    pub fn ty(&self, fields: &[Field], long_size: usize) -> Option<CType> {
        Some(match self {
            Expr::Num(_, t) => CType::Int(*t),
            Expr::Str(_) => CType::Ptr(Some(IntTy::CHAR)),
            Expr::Field(i) => field_type(fields.get(*i)?, long_size),
            Expr::Index(b, _) | Expr::Unary(Unary::Deref, b) => match b.ty(fields, long_size)? {
                CType::Ptr(Some(t)) => CType::Int(t),
                _ => return None,
            },
            Expr::Unary(Unary::Not, _) => CType::Int(IntTy::INT),
            Expr::Unary(_, e) => match e.ty(fields, long_size)? {
                CType::Int(t) => CType::Int(t.promote()),
                p => p,
            },
            Expr::Binary(op, a, b) => match op {
                Binary::Lt
                | Binary::Gt
                | Binary::Le
                | Binary::Ge
                | Binary::Eq
                | Binary::Ne
                | Binary::And
                | Binary::Or => CType::Int(IntTy::INT),
                Binary::Shl | Binary::Shr => match a.ty(fields, long_size)? {
                    CType::Int(t) => CType::Int(t.promote()),
                    p => p,
                },
                _ => match (a.ty(fields, long_size)?, b.ty(fields, long_size)?) {
                    (CType::Int(x), CType::Int(y)) => CType::Int(IntTy::common(x, y)),
                    (p @ CType::Ptr(_), CType::Int(_)) | (CType::Int(_), p @ CType::Ptr(_)) => p,
                    _ => CType::Int(IntTy::long(long_size)),
                },
            },
            Expr::Cond(_, a, b) => match (a.ty(fields, long_size)?, b.ty(fields, long_size)?) {
                (CType::Int(x), CType::Int(y)) => CType::Int(IntTy::common(x, y)),
                (p @ CType::Ptr(_), _) | (_, p @ CType::Ptr(_)) => p,
            },
            Expr::Cast(t, _) => *t,
            Expr::Helper(h) => match h {
                Helper::DynLen { .. } => CType::Int(IntTy::UINT),
                Helper::NsToSecs(_) => CType::Int(IntTy::ULLONG),
                Helper::NsWithoutSecs(_) => CType::Int(IntTy::UINT),
                Helper::InIrq(_) => CType::Int(IntTy::INT),
                Helper::DynArray { .. } => CType::Ptr(Some(IntTy::CHAR)),
                _ => CType::Ptr(Some(IntTy::CHAR)),
            },
        })
    }
}

/// The C type of `REC->field`: an integer, or for arrays and dynamic
/// fields a pointer to their elements.
pub fn field_type(f: &Field, long_size: usize) -> CType {
    let elem = IntTy::new(8 * f.elem_size.min(8) as u32, f.signed);
    match f.kind {
        FieldKind::Int if f.is_array => CType::Ptr(Some(elem)),
        FieldKind::Int if f.type_name.contains('*') => CType::Int(IntTy::ulong(long_size)),
        FieldKind::Int if matches!(f.elem_size, 1 | 2 | 4 | 8) => CType::Int(elem),
        FieldKind::DataLoc { .. } => CType::Ptr(Some(IntTy::CHAR)),
        _ => CType::Ptr(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields() -> Vec<Field> {
        let text = "name: t\nID: 1\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\n\
\tfield:long prev_state;\toffset:8;\tsize:8;\tsigned:1;\n\
\tfield:__data_loc char[] name;\toffset:16;\tsize:4;\tsigned:0;\n\
\tfield:__rel_loc char[] r;\toffset:20;\tsize:4;\tsigned:0;\n\
\tfield:u8 saddr[4];\toffset:24;\tsize:4;\tsigned:0;\n\nprint fmt: \"\"\n";
        crate::EventFormat::parse(text, 8).unwrap().fields
    }

    #[test]
    fn parses_what_formats_use() {
        let f = fields();
        for ok in [
            "REC->prev_state & ((((0x00000000 | 0x00000001) + 1) << 1) - 1)",
            "(REC->prev_state & 3) ? __print_flags(REC->prev_state & 3, \"|\", { 0x01, \"S\" }, { 0x02, \"D\" }) : \"R\"",
            "__print_symbolic(REC->prev_state, { 0, \"HI\" }, { 1, \"TIMER\" })",
            "((unsigned int) ((REC->prev_state) >> 20))",
            "( gfp_t)REC->prev_state",
            "(void *)REC->prev_state",
            "(const char *)__get_str(name)",
            "__get_rel_str(r)",
            "REC->saddr[3]",
            "sizeof(u64)",
            "sizeof(unsigned int)",
            "sizeof(struct sockaddr_in6)",
            "__print_hex(__get_dynamic_array(name), __get_dynamic_array_len(name))",
            "__print_array(__get_dynamic_array(name), __get_dynamic_array_len(name) / sizeof(u64), sizeof(u64))",
            "__print_dynamic_array(name, 1)",
            "REC->prev_state ? \"a\" \"b\" : ((void *)0)",
            "__print_flags(REC->prev_state, \"\", { (1u << 1), \"ROOT\" }, { -1, \"ALL\" })",
            "'c' + !REC->prev_state - ~1",
            "__builtin_expect(!!(REC->prev_state), 0)",
        ] {
            parse(ok, &f, 8, None).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for bad in [
            "jiffies_to_msecs(REC->prev_state)",
            "REC->nope",
            "__get_str(prev_state)",
            "__get_str(r)",
            "__get_rel_str(name)",
            "REC->prev_state +",
            "({ int x = 1; x; })",
            "SOME_ENUM_NAME",
            "&REC->prev_state",
            "REC->saddr.x",
            "(struct foo)REC->prev_state",
            "(mystery_t)REC->prev_state",
            "\"abc",
            "REC->prev_state ? 1",
            "__print_symbolic(REC->prev_state, { REC->prev_state, \"x\" })",
            "",
        ] {
            assert!(parse(bad, &f, 8, None).is_err(), "{bad}");
        }
    }

    #[test]
    fn precedence_and_casts() {
        let f = fields();
        let e = parse("1 + 2 * 3 << 1 | 4", &f, 8, None).unwrap();
        assert_eq!(
            super::super::eval::constant(&e, 8),
            Some(((1 + 2 * 3) << 1) | 4)
        );
        let e = parse("(unsigned char)-1", &f, 8, None).unwrap();
        assert_eq!(super::super::eval::constant(&e, 8), Some(255));
        let e = parse("-1 < 0u", &f, 8, None).unwrap();
        assert_eq!(super::super::eval::constant(&e, 8), Some(0));
        let e = parse("-1 < 0", &f, 8, None).unwrap();
        assert_eq!(super::super::eval::constant(&e, 8), Some(1));
        let e = parse("(1 ? -1 : 0u) > 0", &f, 8, None).unwrap();
        assert_eq!(super::super::eval::constant(&e, 8), Some(1));
        let e = parse("sizeof(long) + sizeof(char *)", &f, 4, None).unwrap();
        assert_eq!(super::super::eval::constant(&e, 4), Some(8));
    }
}
