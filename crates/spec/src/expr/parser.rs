//! Recursive-descent parser over the token list. Precedence, loosest first:
//! `||`, `&&`, comparisons (`==` `!=` `<` `<=` `>` `>=` `in`, not chained), `??`, `+` `-`,
//! unary `!` `-`, then literals, paths, arrays, calls and parentheses.

use serde_json::Value;

use super::ExprError;
use super::ast::{Ast, AstKind, BinOp, Func, MAX_TREE_DEPTH};
use super::lexer::{Tok, Token};

use super::MAX_EXPR_NESTING as MAX_NESTING;

pub(super) fn parse(tokens: Vec<Token>) -> Result<Ast, ExprError> {
    let mut parser = Parser {
        tokens,
        at: 0,
        nesting: 0,
    };
    let ast = parser.or()?;
    let token = parser.peek();
    if !matches!(token.tok, Tok::End) {
        return Err(ExprError::Syntax {
            offset: token.offset,
            message: format!(
                "unexpected {} after a complete expression",
                token.tok.describe()
            ),
        });
    }
    Ok(ast)
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
    nesting: usize,
}

impl Parser {
    fn peek(&self) -> &Token {
        // The token list always ends with `End`, and the parser never moves past it.
        &self.tokens[self.at.min(self.tokens.len() - 1)]
    }

    /// Takes the current token (each is taken once; the parser never looks back).
    fn bump(&mut self) -> Token {
        let last = self.tokens.len() - 1;
        if self.at >= last {
            return self.tokens[last].clone();
        }
        let offset = self.tokens[self.at].offset;
        let token = std::mem::replace(
            &mut self.tokens[self.at],
            Token {
                tok: Tok::End,
                offset,
            },
        );
        self.at += 1;
        token
    }

    fn enter(&mut self, offset: usize) -> Result<(), ExprError> {
        self.nesting += 1;
        if self.nesting > MAX_NESTING {
            return Err(ExprError::TooDeep {
                offset,
                max: MAX_NESTING,
            });
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.nesting -= 1;
    }

    fn expect(&mut self, want: &Tok, what: &str) -> Result<Token, ExprError> {
        let token = self.bump();
        if std::mem::discriminant(&token.tok) == std::mem::discriminant(want) {
            Ok(token)
        } else {
            Err(ExprError::Syntax {
                offset: token.offset,
                message: format!("expected {what}, found {}", token.tok.describe()),
            })
        }
    }

    fn or(&mut self) -> Result<Ast, ExprError> {
        let mut left = self.and()?;
        while matches!(self.peek().tok, Tok::Or) {
            let offset = self.bump().offset;
            let right = self.and()?;
            left = binary(BinOp::Or, left, right, offset)?;
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Ast, ExprError> {
        let mut left = self.comparison()?;
        while matches!(self.peek().tok, Tok::And) {
            let offset = self.bump().offset;
            let right = self.comparison()?;
            left = binary(BinOp::And, left, right, offset)?;
        }
        Ok(left)
    }

    fn comparison(&mut self) -> Result<Ast, ExprError> {
        let left = self.coalesce()?;
        let Some(op) = comparison_op(&self.peek().tok) else {
            return Ok(left);
        };
        let offset = self.bump().offset;
        let right = self.coalesce()?;
        let next = self.peek();
        if comparison_op(&next.tok).is_some() {
            return Err(ExprError::Syntax {
                offset: next.offset,
                message: "comparisons do not chain; use `&&` or parentheses".into(),
            });
        }
        binary(op, left, right, offset)
    }

    fn coalesce(&mut self) -> Result<Ast, ExprError> {
        let mut left = self.additive()?;
        while matches!(self.peek().tok, Tok::Coalesce) {
            let offset = self.bump().offset;
            let right = self.additive()?;
            left = binary(BinOp::Coalesce, left, right, offset)?;
        }
        Ok(left)
    }

    fn additive(&mut self) -> Result<Ast, ExprError> {
        let mut left = self.unary()?;
        loop {
            let op = match self.peek().tok {
                Tok::Plus => BinOp::Add,
                Tok::Minus => BinOp::Sub,
                _ => return Ok(left),
            };
            let offset = self.bump().offset;
            let right = self.unary()?;
            left = binary(op, left, right, offset)?;
        }
    }

    fn unary(&mut self) -> Result<Ast, ExprError> {
        let offset = self.peek().offset;
        let make: fn(Box<Ast>) -> AstKind = match self.peek().tok {
            Tok::Not => AstKind::Not,
            Tok::Minus => AstKind::Neg,
            _ => return self.primary(),
        };
        self.bump();
        self.enter(offset)?;
        let operand = self.unary()?;
        self.leave();
        Ast::new(make(Box::new(operand)), offset)
    }

    fn primary(&mut self) -> Result<Ast, ExprError> {
        let token = self.bump();
        let offset = token.offset;
        let kind = match token.tok {
            Tok::Number(n) => AstKind::Literal(Value::Number(n)),
            Tok::String(s) => AstKind::Literal(Value::String(s)),
            Tok::True => AstKind::Literal(Value::Bool(true)),
            Tok::False => AstKind::Literal(Value::Bool(false)),
            Tok::Null => AstKind::Literal(Value::Null),
            Tok::Path(path) => AstKind::Path(path),
            Tok::LParen => {
                self.enter(offset)?;
                let inner = self.or()?;
                self.expect(&Tok::RParen, "`)`")?;
                self.leave();
                return Ok(inner);
            }
            Tok::LBracket => {
                self.enter(offset)?;
                let items = self.list(&Tok::RBracket, "`,` or `]`")?;
                self.leave();
                AstKind::Array(items)
            }
            Tok::Ident(name) => {
                let func = Func::from_name(&name).ok_or_else(|| ExprError::UnknownName {
                    offset,
                    name: name.clone(),
                })?;
                self.expect(&Tok::LParen, "`(` after a function name")?;
                self.enter(offset)?;
                let args = self.list(&Tok::RParen, "`,` or `)`")?;
                self.leave();
                if args.len() != func.arity() {
                    return Err(ExprError::Arity {
                        offset,
                        name: func.name(),
                        expected: func.arity(),
                        found: args.len(),
                    });
                }
                AstKind::Call(func, args)
            }
            other => {
                return Err(ExprError::Syntax {
                    offset,
                    message: format!("expected a value, found {}", other.describe()),
                });
            }
        };
        Ast::new(kind, offset)
    }

    /// Comma-separated expressions up to `close` (already past the opening delimiter).
    fn list(&mut self, close: &Tok, what: &str) -> Result<Vec<Ast>, ExprError> {
        let mut items = Vec::new();
        if std::mem::discriminant(&self.peek().tok) == std::mem::discriminant(close) {
            self.bump();
            return Ok(items);
        }
        loop {
            items.push(self.or()?);
            let token = self.bump();
            match token.tok {
                Tok::Comma => {}
                ref tok if std::mem::discriminant(tok) == std::mem::discriminant(close) => {
                    return Ok(items);
                }
                other => {
                    return Err(ExprError::Syntax {
                        offset: token.offset,
                        message: format!("expected {what}, found {}", other.describe()),
                    });
                }
            }
        }
    }
}

fn comparison_op(tok: &Tok) -> Option<BinOp> {
    Some(match tok {
        Tok::Eq => BinOp::Eq,
        Tok::Ne => BinOp::Ne,
        Tok::Lt => BinOp::Lt,
        Tok::Le => BinOp::Le,
        Tok::Gt => BinOp::Gt,
        Tok::Ge => BinOp::Ge,
        Tok::In => BinOp::In,
        _ => return None,
    })
}

fn binary(op: BinOp, left: Ast, right: Ast, offset: usize) -> Result<Ast, ExprError> {
    Ast::new(AstKind::Binary(op, Box::new(left), Box::new(right)), offset)
}

const _: () = assert!(MAX_NESTING < MAX_TREE_DEPTH);
